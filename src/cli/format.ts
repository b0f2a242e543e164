/** Text for people: aligned tables, short durations, UTC times. */

/**
 * Text with its control characters written as `\x1b` escapes: a job name, a holder or an error
 * message may hold a newline or a terminal escape sequence, which must not reach the terminal.
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** Columns padded to their widest cell, headers in capitals, two spaces apart; cells made printable. */
export function formatTable(headers: readonly string[], cells: readonly (readonly string[])[]): string {
  const rows = cells.map((row) => row.map(printable));
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers.map((header) => header.toUpperCase())), ...rows.map(line)].join('\n') + '\n';
}

/** 350ms, 4.2s, 5m 30s, 2h 5m, 3d 4h. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1).replace(/\.0$/, '')}s`;
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1_000, 's'],
  ];
  const parts: string[] = [];
  let rest = Math.round(ms / 1_000) * 1_000;
  for (const [size, unit] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join(' ');
}

/** 2026-11-29 07:16:47Z */
export function formatTime(date: Date | null): string {
  return date === null ? '-' : `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** One line, at most `max` characters. */
export function oneLine(text: string | null, max = 60): string {
  if (text === null) return '';
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
