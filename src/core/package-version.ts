import { readFileSync } from 'node:fs';

/**
 * The version in cronguard's package.json, read when asked (the CLI's `--version`, the version a
 * guard records for its replica): this module runs from dist/src/core/ when installed and from
 * src/core/ in this repository, so the file is looked for in the folders above it, the nearest one
 * named cronguard.
 */
export function packageVersion(): string {
  let folder = new URL('.', import.meta.url);
  for (let depth = 0; depth < 5; depth += 1) {
    try {
      const manifest = JSON.parse(readFileSync(new URL('package.json', folder), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === 'cronguard' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // No package.json here (or not ours): look one folder up.
    }
    folder = new URL('..', folder);
  }
  throw new Error("cronguard's package.json was not found above the folder of src/core/package-version");
}

/** `packageVersion()`, or 'unknown' where no package.json sits above the code (an app bundled into one file). */
export function packageVersionOrUnknown(): string {
  try {
    return packageVersion();
  } catch {
    return 'unknown';
  }
}
