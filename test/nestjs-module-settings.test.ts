// The Nest apps (test/fixtures/nest-app, examples/nestjs) compile against the built package under
// the module settings Nest apps use: `commonjs` with node10 resolution (the Nest CLI starter's for
// years; it reads no "exports", so 'cronguard/nestjs' needs the package's typesVersions), `node16`
// and `nodenext`. Under node16 a CommonJS file cannot import an ES module at all (Nest 12's own
// packages included), so that variant compiles the app as an ES module ("type": "module").
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, describeResult, repoRoot, runProcess, type ProcessResult } from './support/run-process.js';

const tempDir = mkdtempSync(join(tmpdir(), 'cronguard-nest-modules-'));
afterAll(() => rmSync(tempDir, { recursive: true, force: true }));

const apps = [
  { app: 'test/fixtures/nest-app', source: join(repoRoot, 'test', 'fixtures', 'nest-app', 'app.ts') },
  { app: 'examples/nestjs', source: join(repoRoot, 'examples', 'nestjs', 'src') },
] as const;

const settings = [
  { setting: 'commonjs', type: 'commonjs', options: { module: 'commonjs', moduleResolution: 'node10', ignoreDeprecations: '6.0' } },
  { setting: 'node16', type: 'module', options: { module: 'node16', moduleResolution: 'node16' } },
  { setting: 'nodenext', type: 'commonjs', options: { module: 'nodenext', moduleResolution: 'nodenext' } },
] as const;

/** What the apps install, linked from ours; cronguard is the repository itself (its package.json, its dist/). */
const INSTALLED = ['@nestjs/common', '@nestjs/core', '@nestjs/schedule', 'reflect-metadata', 'rxjs', '@types/node'];

const cases = apps.flatMap(({ app, source }) => settings.map((setting) => ({ app, source, ...setting })));
const results = new Map<string, ProcessResult>();

beforeAll(async () => {
  assertBuilt();
  for (const { app, source, setting, type, options } of cases) {
    const dir = join(tempDir, `${app.replaceAll('/', '-')}-${setting}`);
    mkdirSync(join(dir, 'node_modules', '@nestjs'), { recursive: true });
    mkdirSync(join(dir, 'node_modules', '@types'), { recursive: true });
    symlinkSync(repoRoot, join(dir, 'node_modules', 'cronguard'), 'dir');
    for (const name of INSTALLED) symlinkSync(join(repoRoot, 'node_modules', name), join(dir, 'node_modules', name), 'dir');
    cpSync(source, join(dir, 'src', source.endsWith('.ts') ? 'app.ts' : ''), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'nest-app', private: true, type }));
    const compilerOptions = {
      target: 'ES2022',
      strict: true,
      skipLibCheck: true,
      types: ['node'],
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      noEmit: true,
      ...options,
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src'] }, null, 2));
    results.set(
      `${app} ${setting}`,
      await runProcess(process.execPath, [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], dir, 170_000),
    );
  }
}, 600_000);

describe.each(cases)('$app under "module": "$setting"', ({ app, setting }) => {
  it("compiles, 'cronguard/nestjs' included", () => {
    const result = results.get(`${app} ${setting}`);
    expect(result?.code, result && describeResult(`tsc (${app}, ${setting})`, result)).toBe(0);
  });
});
