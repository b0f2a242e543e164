/** Text for people: aligned tables, printable cells (durations and times: core/duration.ts). */

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

/** One line, at most `max` characters. */
export function oneLine(text: string | null, max = 60): string {
  if (text === null) return '';
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
