import { IANAZone } from 'luxon';
import type { Logger } from './logger.js';

let resolved: { zone: string; note: string | null } | undefined;

/**
 * The process's own time zone as an IANA name, resolved once: what `Intl` says when it is one;
 * else, for a path `TZ` (`/usr/share/zoneinfo/Europe/Paris`), the name after `zoneinfo/`; else
 * UTC, with a note of why. An empty `TZ` makes Intl answer `Etc/Unknown`, a path or an unknown
 * name nothing at all: stored as the zone of a schedule, that made every reader of the ledger fail.
 */
function resolveProcessTimeZone(): { zone: string; note: string | null } {
  const intl = Intl.DateTimeFormat().resolvedOptions().timeZone as string | undefined;
  if (intl !== undefined && intl !== 'Etc/Unknown' && IANAZone.isValidZone(intl)) return { zone: intl, note: null };
  const tz = process.env['TZ'] ?? '';
  const fromPath = /zoneinfo\/(.+)$/.exec(tz)?.[1];
  if (fromPath !== undefined && IANAZone.isValidZone(fromPath)) return { zone: fromPath, note: null };
  return {
    zone: 'UTC',
    note: `The process's time zone (TZ=${JSON.stringify(tz)}, read as ${JSON.stringify(intl ?? null)}) is no IANA zone: schedules without \`timezone\` are declared in UTC. Set TZ to an IANA name like 'Europe/Paris', or give each job its \`timezone\``,
  };
}

/** The process's IANA time zone (UTC when it has none), resolved once; the first call with a logger warns once when it fell back to UTC. */
export function processTimeZone(logger?: Logger): string {
  resolved ??= resolveProcessTimeZone();
  if (resolved.note !== null && logger !== undefined) {
    logger.warn(resolved.note);
    resolved = { ...resolved, note: null };
  }
  return resolved.zone;
}
