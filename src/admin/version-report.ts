import type { ReplicaRecord } from './replicas.js';
import type { SchemaVersions } from './schema-version.js';

/** What `guard.versions()` and `cronguard versions` report: who runs what, against which schema. */
export interface VersionReport {
  /** The cronguard version of the code asking. */
  readonly package: string;
  readonly schema: SchemaVersions;
  /** Every replica that recorded its version (0.2.0 and later), most recently seen first. */
  readonly replicas: readonly ReplicaRecord[];
  /** The holder of each held lock, with its version (null: it recorded none, see `holderVersion`). */
  readonly holders: readonly { readonly job: string; readonly lockedBy: string; readonly version: string | null }[];
}

/**
 * The cronguard version the replica `lockedBy` recorded; null when it recorded none: a replica of a
 * version before 0.2.0 (which has no replica table), or one whose tables were not migrated yet.
 */
export function holderVersion(lockedBy: string, replicas: readonly ReplicaRecord[]): string | null {
  return replicas.find((replica) => replica.lockedBy === lockedBy)?.version ?? null;
}
