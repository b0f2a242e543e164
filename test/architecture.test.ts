// The layout of src/ (docs/architecture.md): the layers import one way, and ESLint says so when an
// import goes against the direction; no import cycle among files or folders; no file over 400 lines.
// No database: these read the source.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/run-process.js';

const src = join(repoRoot, 'src');
const MAX_LINES = 400;

describe('the layer rule in eslint.config.js', () => {
  const eslint = new ESLint({ cwd: repoRoot });

  /** The no-restricted-imports messages ESLint gives `code` placed at `file`. */
  async function restrictedImports(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: join(repoRoot, file) });
    return (result?.messages ?? []).filter((message) => message.ruleId === 'no-restricted-imports').map((message) => message.message);
  }

  it.each([
    ['src/core/x.ts', "import { Guard } from '../guard/create-guard.js';"],
    ['src/core/x.ts', "import type { DatabaseInput } from '../dialects/connect.js';"],
    ['src/core/x.ts', "export { createGuard } from '../index.js';"],
    ['src/dialects/x.ts', "import { runMigrations } from '../admin/migrate.js';"],
    ['src/dialects/postgres/x.ts', "import type { LockRecord } from '../../admin/locks.js';"],
    ['src/dialects/postgres/x.ts', "import { openDatabase } from '../connect.js';"],
    ['src/dialects/postgres/x.ts', "import { mysqlDialect } from '../mysql/dialect.js';"],
    ['src/admin/x.ts', "import { scheduleJob } from '../integrations/node-cron/schedule.js';"],
    ['src/integrations/node-cron/x.ts', "import type { Guard } from '../../guard/create-guard.js';"],
    ['src/integrations/x.ts', "import { main } from '../cli/main.js';"],
    ['src/guard/x.ts', "import { CronguardModule } from '../nestjs/index.js';"],
    ['src/nestjs/x.ts', "import { main } from '../cli/main.js';"],
    ['migrations/x.ts', "import { runMigrations } from '../src/admin/migrate.js';"],
  ])('%s may not %s', async (file, code) => {
    const messages = await restrictedImports(file, `${code}\n`);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain('docs/architecture.md');
  });

  it.each([
    ['src/core/x.ts', "import { GuardError } from './errors.js';"],
    ['src/dialects/postgres/x.ts', "import { quoteTable } from '../common/quote.js';"],
    ['src/dialects/postgres/x.ts', "import type { Dialect } from '../../core/dialect.js';"],
    ['src/admin/x.ts', "import type { Dialect } from '../core/dialect.js';"],
    ['src/integrations/node-cron/x.ts', "import type { ResolvedJobRunner } from '../../core/runner.js';"],
    ['src/guard/x.ts', "import { scheduleJob } from '../integrations/node-cron/schedule.js';"],
    ['src/cli/x.ts', "import { createGuard } from '../guard/create-guard.js';"],
    ['migrations/x.ts', "import type { Dialect } from '../src/core/dialect.js';"],
  ])('%s may %s', async (file, code) => {
    expect(await restrictedImports(file, `${code}\n`)).toEqual([]);
  });
});

/** Every .ts file under src/. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The src/ files a file imports or re-exports from, by relative specifier (type-only and import() included). */
function importsOf(file: string, files: ReadonlySet<string>): string[] {
  const text = readFileSync(file, 'utf8');
  const targets: string[] = [];
  for (const match of text.matchAll(/(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)) {
    const specifier = (match[1] ?? match[2] ?? '').replace(/\.js$/, '.ts');
    const target = resolve(dirname(file), specifier);
    const found = [target, `${target}.ts`, join(target, 'index.ts')].find((candidate) => files.has(candidate));
    if (found !== undefined) targets.push(found);
  }
  return targets;
}

/** The strongly connected components of more than one node (Tarjan): the cycles. */
function cycles(nodes: readonly string[], next: (node: string) => Iterable<string>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    for (const other of next(node)) {
      if (!index.has(other)) {
        visit(other);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(other) ?? 0));
      } else if (onStack.has(other)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(other) ?? 0));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component);
  };
  for (const node of nodes) if (!index.has(node)) visit(node);
  return found;
}

describe('src/', () => {
  const files = sourceFiles(src);
  const fileSet = new Set(files);
  const edges = new Map(files.map((file) => [file, importsOf(file, fileSet)]));

  it('reads the imports it checks', () => {
    // Guards the parser: a regex that matched nothing would find no cycle anywhere.
    expect(edges.get(join(src, 'guard', 'create-guard.ts'))).toContain(join(src, 'core', 'execute.ts'));
  });

  it('has no import cycle among its files', () => {
    const found = cycles(files, (file) => edges.get(file) ?? []).map((cycle) => cycle.map((file) => relative(repoRoot, file)));
    expect(found).toEqual([]);
  });

  it('has no import cycle among its folders (each folder, nested ones included)', () => {
    const folderOf = (file: string): string => relative(src, dirname(file)) || '.';
    const folders = [...new Set(files.map(folderOf))];
    const folderEdges = new Map(folders.map((folder) => [folder, new Set<string>()]));
    for (const [file, targets] of edges) {
      for (const target of targets) if (folderOf(target) !== folderOf(file)) folderEdges.get(folderOf(file))?.add(folderOf(target));
    }
    expect(cycles(folders, (folder) => folderEdges.get(folder) ?? [])).toEqual([]);
  });

  it(`has no file over ${MAX_LINES} lines`, () => {
    const long = files
      .map((file) => ({ file: relative(repoRoot, file), lines: readFileSync(file, 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > MAX_LINES);
    expect(long).toEqual([]);
  });
});
