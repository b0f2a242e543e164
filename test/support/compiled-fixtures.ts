import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync, transformSync } from 'esbuild';
import { assertBuilt, repoRoot } from './run-process.js';

const fixturesDir = fileURLToPath(new URL('../fixtures/', import.meta.url));

/**
 * Set by the unit suite's global setup (test/setup/global-setup.ts) to the folder it compiled the
 * programs into once for the whole run; a test process without it (the fault and topology suites,
 * the bench) compiles its own on first use.
 */
export const TEST_PROGRAMS_VARIABLE = 'CRONGUARD_TEST_PROGRAMS';

/**
 * The fixtures that stay one module each: upgrade-replica imports the package it runs as a
 * computed path (this release or an unpacked old one), which a bundle cannot resolve ahead of time.
 */
const UNBUNDLED = new Set(['upgrade-replica.ts']);

/**
 * The package's own dependencies are bundled into each program (what the built package loads on
 * every start: Kysely's ~280 ES modules, luxon, node-cron); everything else is loaded from
 * node_modules as a user's app loads it: the drivers (CommonJS, one native), NestJS and its
 * reflect-metadata, OpenTelemetry.
 */
function externalPackages(): string[] {
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
  const bundled = new Set(Object.keys(manifest['dependencies'] ?? {}));
  const all = [...Object.keys(manifest['devDependencies'] ?? {}), ...Object.keys(manifest['peerDependencies'] ?? {})];
  return [...new Set(all)].filter((name) => !bundled.has(name));
}

let programsDir: string | undefined;

function programs(): string {
  programsDir ??= process.env[TEST_PROGRAMS_VARIABLE] ?? compileTestPrograms(join(repoRoot, '.tmp', `fixtures-${process.pid}`), true);
  return programsDir;
}

/**
 * The path of a worker fixture compiled to JavaScript, to run on plain `node`, bundled with the
 * built package it imports. Each worker process used to spend most of its start loading modules one
 * file at a time (0.5 CPU-seconds, three quarters of it Node's ES module loader), and the suite
 * starts hundreds of them, several at once on two cores; one file loads in a third of that.
 */
export function compiledFixture(fixture: string): string {
  const dir = programs();
  return UNBUNDLED.has(fixture)
    ? join(dir, 'test', 'fixtures', fixture.replace(/\.ts$/, '.js'))
    : join(dir, 'test', 'bundled', fixture.replace(/\.ts$/, '.js'));
}

/**
 * The `cronguard` command the tests run: the built `dist/src/cli/main.js` bundled into one file in
 * the same way (the same code, loaded in a third of the CPU time; the suite runs it hundreds of
 * times). `test/package.test.ts` runs the packed package's own bin, unbundled, as users get it.
 */
export function compiledCli(): string {
  return join(programs(), 'test', 'bundled', 'cronguard-cli.js');
}

/** Whether a process of this id is running (a test process killed by its runner leaves its folder behind). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Compiles the fixtures (test/fixtures/*.ts) with esbuild, the compiler tsx runs, with this
 * repository's compiler options, into `<root>/test/fixtures/`, beside a `src` link to the built
 * `dist/src`: so their imports of `../../src/index.js` load the built package (as `npm test` builds
 * it first), and bare imports resolve from the repository's node_modules. Then bundles each of them,
 * and the CLI, into `<root>/test/bundled/`, their shared code as chunks beside them (in the same folder: the CLI's package.json lookup climbs five folders). `removeOnExit`:
 * the folder goes when this process exits; the folders of test processes that ended without an
 * exit event (killed by the runner) go when the next one compiles.
 */
export function compileTestPrograms(root: string, removeOnExit: boolean): string {
  assertBuilt();
  const tmp = join(repoRoot, '.tmp');
  mkdirSync(tmp, { recursive: true });
  for (const name of readdirSync(tmp)) {
    const pid = /^fixtures-(\d+)$/.exec(name)?.[1];
    if (pid !== undefined && !running(Number(pid))) rmSync(join(tmp, name), { recursive: true, force: true });
  }
  rmSync(root, { recursive: true, force: true });
  const out = join(root, 'test', 'fixtures');
  mkdirSync(out, { recursive: true });
  symlinkSync(join(repoRoot, 'dist', 'src'), join(root, 'src'), 'dir');
  if (removeOnExit) process.on('exit', () => rmSync(root, { recursive: true, force: true }));
  const { compilerOptions } = JSON.parse(readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8')) as { compilerOptions: object };
  const entries: Record<string, string> = { 'cronguard-cli': join(root, 'src', 'cli', 'main.js') };
  for (const entry of readdirSync(fixturesDir, { withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const source = readFileSync(join(fixturesDir, entry.name), 'utf8');
    const { code } = transformSync(source, {
      loader: 'ts',
      format: 'esm',
      target: `node${process.versions.node}`,
      sourcemap: 'inline',
      sourcefile: join(fixturesDir, entry.name),
      tsconfigRaw: { compilerOptions },
    });
    const compiled = join(out, entry.name.replace(/\.ts$/, '.js'));
    writeFileSync(compiled, code);
    if (!UNBUNDLED.has(entry.name)) entries[entry.name.replace(/\.ts$/, '')] = compiled;
  }
  buildSync({
    entryPoints: entries,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node}`,
    outdir: join(root, 'test', 'bundled'),
    chunkNames: '[name]-[hash]',
    external: externalPackages(),
    // The bundled CommonJS dependency (node-cron) calls `require` for Node's own modules.
    banner: {
      js: "import { createRequire as createRequireOfBundle } from 'node:module'; const require = createRequireOfBundle(import.meta.url);",
    },
    logLevel: 'error',
  });
  return root;
}
