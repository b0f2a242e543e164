import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';
import { assertBuilt, repoRoot } from './run-process.js';

const fixturesDir = fileURLToPath(new URL('../fixtures/', import.meta.url));

let compiledDir: string | undefined;

/**
 * The path of a worker fixture compiled to JavaScript, to run on plain `node`. Through tsx, each
 * worker process spent about three times the CPU to start (its loader hooks see every module the
 * worker loads), and tests start dozens of them, several at once on two cores.
 *
 * The fixtures (test/fixtures/*.ts) are compiled once per test process with esbuild, the compiler
 * tsx runs, with this repository's compiler options, into `.tmp/fixtures-<pid>/test/fixtures/`,
 * beside a `src` link to the built `dist/src`: so their imports of `../../src/index.js` load the
 * built package (as `npm test` builds it first), and bare imports resolve from the repository's
 * node_modules, as before. The folder goes when the process exits; the folders of test processes
 * that ended without an exit event (killed by the runner) go when the next one compiles.
 */
export function compiledFixture(fixture: string): string {
  compiledDir ??= compileFixtures();
  return join(compiledDir, fixture.replace(/\.ts$/, '.js'));
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

function compileFixtures(): string {
  assertBuilt();
  const tmp = join(repoRoot, '.tmp');
  mkdirSync(tmp, { recursive: true });
  for (const name of readdirSync(tmp)) {
    const pid = /^fixtures-(\d+)$/.exec(name)?.[1];
    if (pid !== undefined && !running(Number(pid))) rmSync(join(tmp, name), { recursive: true, force: true });
  }
  const root = join(tmp, `fixtures-${process.pid}`);
  rmSync(root, { recursive: true, force: true });
  const out = join(root, 'test', 'fixtures');
  mkdirSync(out, { recursive: true });
  symlinkSync(join(repoRoot, 'dist', 'src'), join(root, 'src'), 'dir');
  process.on('exit', () => rmSync(root, { recursive: true, force: true }));
  const { compilerOptions } = JSON.parse(readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8')) as { compilerOptions: object };
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
    writeFileSync(join(out, entry.name.replace(/\.ts$/, '.js')), code);
  }
  return out;
}
