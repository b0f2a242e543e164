// The package as an app gets it: `npm pack` of the built package, unpacked into the node_modules
// of throwaway apps next to its runtime dependencies (linked from ours, as npm would install them)
// and nothing else: no @types/luxon, @types/pg or @types/better-sqlite3, and no database driver but
// the one an app installs for its database. Our typescript type-checks an app's files against the
// packed .d.ts; plain node runs the packed JavaScript.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, copyFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from './support/dialects.js';
import { assertBuilt, describeResult, repoRoot, runProcess, type ProcessResult } from './support/run-process.js';

const fixture = join(repoRoot, 'test', 'fixtures', 'package-consumer');
const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
const tempDir = mkdtempSync(join(tmpdir(), 'cronguard-package-'));
afterAll(() => rmSync(tempDir, { recursive: true, force: true }));

interface PackageJson {
  main?: string;
  types?: string;
  bin?: Record<string, string>;
  exports?: Record<string, string | Record<string, string>>;
  typesVersions?: Record<string, Record<string, string[]>>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** What `npm pack --json` says of the tarball. */
interface PackReport {
  filename: string;
  files: { path: string }[];
}

const DRIVERS = ['pg', 'mysql2', 'better-sqlite3'];
const DRIVER_TYPES = ['@types/pg', '@types/luxon', '@types/better-sqlite3'];

/** Packed once, by the repository's npm, from the build that `npm test` made (no prepack rebuild mid-suite). */
let packed: { report: PackReport; tarball: string };
let packedFiles: string[];

async function pack(): Promise<{ report: PackReport; tarball: string }> {
  const destination = join(tempDir, 'pack');
  mkdirSync(destination);
  const result = await runProcess('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], repoRoot, 120_000);
  if (result.code !== 0) throw new Error(describeResult('npm pack', result));
  const [report] = JSON.parse(result.stdout) as PackReport[];
  if (report === undefined) throw new Error(describeResult('npm pack', result));
  return { report, tarball: join(destination, report.filename) };
}

/**
 * An app folder whose node_modules holds the unpacked tarball and, linked from ours, the package's
 * runtime dependencies plus `extra` (what the app itself installed).
 */
async function installApp(name: string, extra: readonly string[]): Promise<string> {
  const app = join(tempDir, name);
  const installed = join(app, 'node_modules', 'cronguard');
  mkdirSync(installed, { recursive: true });
  copyFileSync(join(fixture, 'package.json'), join(app, 'package.json'));
  const untar = await runProcess('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1'], app);
  if (untar.code !== 0) throw new Error(describeResult('tar', untar));
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as PackageJson;
  for (const dependency of [...Object.keys(manifest.dependencies ?? {}), ...extra]) {
    const link = join(app, 'node_modules', dependency);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(repoRoot, 'node_modules', dependency), link, 'dir');
  }
  return app;
}

/** Where node or tsc would find `name` from `app`: in its node_modules or any folder above. */
function findInstalled(app: string, name: string): string | undefined {
  for (let dir = app; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

beforeAll(async () => {
  assertBuilt();
  packed = await pack();
  packedFiles = packed.report.files.map((file) => file.path).sort();
}, 180_000);

describe('the tarball', () => {
  let unpacked: string;
  let manifest: PackageJson;

  beforeAll(async () => {
    unpacked = join(await installApp('tarball', []), 'node_modules', 'cronguard');
    manifest = JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as PackageJson;
  }, 120_000);

  it('builds dist/ before `npm pack` and `npm publish` (a prepack script)', () => {
    expect(manifest.scripts?.['prepack']).toBe('npm run build');
  });

  it('ships the built code, the SQL migrations and the README, and no sources, tests, fixtures or examples', () => {
    for (const file of [
      'package.json',
      'README.md',
      'LICENSE',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/cli/main.js',
      'dist/migrations/index.js',
    ]) {
      expect(packedFiles).toContain(file);
    }
    expect(packedFiles.some((file) => file.startsWith('migrations/sql/'))).toBe(true);
    const unexpected = packedFiles.filter(
      (file) =>
        !/^(dist\/(src|migrations)\/.+\.(js|d\.ts)|migrations\/sql\/.+\.(sql|md)|package\.json|README\.md|CHANGELOG\.md|LICENSE(\.md)?)$/.test(
          file,
        ),
    );
    expect(unexpected).toEqual([]);
    expect(packedFiles.filter((file) => /(^|\/)(test|fixtures|examples|bench)\/|\.test\./.test(file))).toEqual([]);
  });

  it('ships the MIT license its package.json names, to cronguard contributors', () => {
    expect(readFileSync(join(unpacked, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n\nCopyright \(c\) cronguard contributors\n/);
    expect((manifest as { license?: string }).license).toBe('MIT');
  });

  it('has every file its package.json points at', () => {
    const exportTargets = Object.values(manifest.exports ?? {}).flatMap((target) =>
      typeof target === 'string' ? [target] : Object.values(target),
    );
    const typesVersionsTargets = Object.values(manifest.typesVersions ?? {}).flatMap((paths) => Object.values(paths).flat());
    const targets = [manifest.main, manifest.types, ...Object.values(manifest.bin ?? {}), ...exportTargets, ...typesVersionsTargets];
    for (const target of targets) {
      expect(target).toBeDefined();
      expect(packedFiles).toContain(posix.normalize(target ?? ''));
    }
    expect(readFileSync(join(unpacked, manifest.bin?.['cronguard'] ?? ''), 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
  });

  it('has no source map, nor a sourceMappingURL, that points at a file it does not ship', () => {
    const missing: string[] = [];
    for (const file of packedFiles) {
      const text = readFileSync(join(unpacked, file), 'utf8');
      for (const [, url] of text.matchAll(/^\/\/# sourceMappingURL=(\S+)$/gm)) {
        if (url !== undefined && !url.startsWith('data:') && !packedFiles.includes(posix.join(posix.dirname(file), url)))
          missing.push(`${file} -> ${url}`);
      }
      if (file.endsWith('.map')) {
        const map = JSON.parse(text) as { sources: string[]; sourcesContent?: (string | null)[] };
        map.sources.forEach((source, index) => {
          const shipped = packedFiles.includes(posix.join(posix.dirname(file), source));
          if (!shipped && typeof map.sourcesContent?.[index] !== 'string') missing.push(`${file} -> ${source}`);
        });
      }
    }
    expect(missing).toEqual([]);
  });

  it('depends on kysely, luxon and node-cron only; the drivers are optional peer dependencies', () => {
    expect(Object.keys(manifest.dependencies ?? {}).sort()).toEqual(['kysely', 'luxon', 'node-cron']);
    for (const driver of [...DRIVERS, '@opentelemetry/api']) {
      expect(manifest.peerDependencies?.[driver], driver).toBeDefined();
      expect(manifest.peerDependenciesMeta?.[driver]?.optional, driver).toBe(true);
    }
  });
});

/** The compiler settings every variant shares: a strict app, stricter than ours. */
const STRICT = {
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  target: 'ES2022',
  lib: ['ES2023'],
  types: ['node'],
  noEmit: true,
};

const variants = [
  { name: 'NodeNext', options: { module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck: false } },
  {
    name: 'NodeNext with skipLibCheck',
    options: { module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck: true },
  },
  { name: 'bundler', options: { module: 'ESNext', moduleResolution: 'bundler', skipLibCheck: false } },
  // The README's decorator snippets under experimentalDecorators too (NestJS apps).
  {
    name: 'bundler with skipLibCheck and experimentalDecorators',
    options: { module: 'ESNext', moduleResolution: 'bundler', skipLibCheck: true, experimentalDecorators: true },
  },
];

/**
 * The README's TypeScript snippets (```ts), each as it stands. The NestJS snippet is fenced
 * ```typescript and left out: it needs Nest's packages, and test/nestjs.test.ts builds real Nest apps.
 */
function readmeSnippets(): { line: number; code: string }[] {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => ({
    line: readme.slice(0, match.index).split('\n').length,
    code: match[1] ?? '',
  }));
}

describe('an app type-checking against the packed types (strict, exactOptionalPropertyTypes, no @types of the dependencies)', () => {
  let app: string;
  const files = ['api.ts', 'type-errors.ts', 'readme-context.d.ts'];
  const results = new Map<string, ProcessResult>();

  beforeAll(async () => {
    app = await installApp('types', ['@types/node']);
    for (const file of files) copyFileSync(join(fixture, file), join(app, file));
    readmeSnippets().forEach(({ line, code }, index) => {
      const file = `readme-${index + 1}.ts`;
      writeFileSync(join(app, file), `// README.md, the snippet at line ${line}\n${code}\nexport {};\n`);
      files.push(file);
    });
    await Promise.all(
      variants.map(async ({ name, options }, index) => {
        const config = join(app, `tsconfig.${index}.json`);
        writeFileSync(config, JSON.stringify({ compilerOptions: { ...STRICT, ...options }, files }, null, 2));
        results.set(name, await runProcess(process.execPath, [tsc, '-p', config, '--listFiles'], app, 180_000));
      }),
    );
  }, 240_000);

  it('has none of the @types packages, and no database driver, within reach', () => {
    for (const name of [...DRIVER_TYPES, ...DRIVERS]) expect(findInstalled(app, name), name).toBeUndefined();
  });

  it('extracts the six TypeScript snippets of the README', () => {
    expect(files.filter((file) => file.startsWith('readme-') && file.endsWith('.ts') && !file.endsWith('.d.ts'))).toHaveLength(6);
  });

  it.each(variants.map(({ name }) => name))('%s: compiles with no diagnostic, reading the packed .d.ts', (name) => {
    const result = results.get(name);
    // --listFiles: a line for each file the compiler read; any other line is a diagnostic.
    const listed = (result?.stdout ?? '').trim().split('\n');
    expect(listed.filter((line) => !existsSync(line)).join('\n')).toBe('');
    expect(result?.code, result && describeResult(`tsc (${name})`, result)).toBe(0);
    expect(listed).toContain(join(app, 'node_modules', 'cronguard', 'dist', 'src', 'index.d.ts'));
    expect(listed.filter((file) => /@types\/(pg|luxon|better-sqlite3)\/|\/(better-sqlite3|mysql2|pg)\//.test(file))).toEqual([]);
    expect(result?.stderr).toBe('');
  });
});

describe('an app with no @types/node', () => {
  let app: string;
  const results = new Map<boolean, ProcessResult>();

  beforeAll(async () => {
    app = await installApp('no-node-types', []);
    copyFileSync(join(fixture, 'no-node-types.ts'), join(app, 'no-node-types.ts'));
    await Promise.all(
      [true, false].map(async (skipLibCheck) => {
        const config = join(app, `tsconfig.${String(skipLibCheck)}.json`);
        const compilerOptions = { ...STRICT, types: [], module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck };
        writeFileSync(config, JSON.stringify({ compilerOptions, files: ['no-node-types.ts'] }, null, 2));
        results.set(skipLibCheck, await runProcess(process.execPath, [tsc, '-p', config], app, 180_000));
      }),
    );
  }, 240_000);

  it('has no @types/node within reach', () => {
    expect(findInstalled(app, '@types/node')).toBeUndefined();
  });

  it('compiles with skipLibCheck', () => {
    const result = results.get(true);
    expect(result?.code, result && describeResult('tsc (skipLibCheck)', result)).toBe(0);
  });

  it("without skipLibCheck, fails on Node's names in the packed .d.ts alone, as the README's Install section says", () => {
    const result = results.get(false);
    expect(result?.code).not.toBe(0);
    const diagnostics = (result?.stdout ?? '').trim().split('\n');
    expect(diagnostics.filter((line) => !line.startsWith('node_modules/cronguard/dist/src/'))).toEqual([]);
    expect(diagnostics.filter((line) => !/'(node:[a-z_]+|AbortSignal|URLSearchParams)'/.test(line))).toEqual([]);
    const install = /^## Install\n([\s\S]*?)^## /m.exec(readFileSync(join(repoRoot, 'README.md'), 'utf8'))?.[1] ?? '';
    expect(install).toContain('`@types/node`');
    expect(install).toContain('`skipLibCheck: true`');
  });
});

describe('an app with no database driver installed', () => {
  let result: ProcessResult;

  beforeAll(async () => {
    const app = await installApp('no-driver', []);
    copyFileSync(join(fixture, 'missing-drivers.mjs'), join(app, 'missing-drivers.mjs'));
    result = await runProcess(process.execPath, ['missing-drivers.mjs', join(app, 'jobs.sqlite')], app);
  }, 120_000);

  it('gets a TypeError from createGuard naming the package to install, for each kind of URL', () => {
    expect(result.code, describeResult('node missing-drivers.mjs', result)).toBe(0);
    const error = (driver: string, usedFor: string) => ({
      constructorName: 'TypeError',
      isTypeError: true,
      message: `Install \`${driver}\` to use ${usedFor}: npm install ${driver}`,
    });
    expect(JSON.parse(result.stdout)).toEqual({
      postgres: error('pg', 'a postgres:// database'),
      mysql: error('mysql2', 'a mysql:// database'),
      sqlite: error('better-sqlite3', 'a sqlite: database'),
    });
    expect(result.stderr).toBe('');
  });
});

describe.skipIf(inject('postgresUrl') === null)('a PostgreSQL app with pg installed, and neither better-sqlite3 nor mysql2', () => {
  let app: string;
  let prefix: string;
  let result: ProcessResult;

  beforeAll(async () => {
    app = await installApp('postgres', ['pg']);
    copyFileSync(join(fixture, 'postgres-app.mjs'), join(app, 'postgres-app.mjs'));
    prefix = uniquePrefix();
    result = await runProcess(process.execPath, ['postgres-app.mjs', inject('postgresUrl') ?? '', prefix], app);
  }, 120_000);

  it('cannot reach better-sqlite3 or mysql2', () => {
    expect(findInstalled(app, 'pg')).toBeDefined();
    for (const driver of ['better-sqlite3', 'mysql2']) expect(findInstalled(app, driver), driver).toBeUndefined();
  });

  it('migrates, runs a job, then skips it while lockAtLeastFor holds the lock, loading pg alone of the drivers', () => {
    expect(result.code, describeResult('node postgres-app.mjs', result)).toBe(0);
    const report = JSON.parse(result.stdout) as { loadedPackages: string[] };
    expect(report).toEqual({
      dialect: 'postgres',
      run: { executed: true, value: 'ran nightly' },
      second: { executed: false, reason: 'locked' },
      statuses: ['succeeded'],
      loadedPackages: expect.arrayContaining(['pg']) as unknown,
    });
    expect(report.loadedPackages.filter((name) => DRIVERS.includes(name))).toEqual(['pg']);
    expect(result.stderr).toBe('');
  });

  // The suite's other CLI tests run the built CLI bundled into one file (test/support/compiled-fixtures.ts);
  // this one runs the bin the tarball ships, as `npx cronguard` finds it in the app's node_modules.
  it("runs the packed bin, unbundled, on the app's tables", async () => {
    const bin = join(app, 'node_modules', 'cronguard', 'dist', 'src', 'cli', 'main.js');
    const history = await runProcess(
      process.execPath,
      [bin, 'history', '--json', '--database', inject('postgresUrl') ?? '', '--table-prefix', prefix],
      app,
    );
    expect(history.code, describeResult('cronguard history', history)).toBe(0);
    const page = JSON.parse(history.stdout) as { runs: { job: string; status: string }[] };
    expect(page.runs.map((run) => [run.job, run.status])).toEqual([['nightly', 'succeeded']]);
  });
});
