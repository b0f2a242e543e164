// The plain SQL files under migrations/sql are written for the databases' command-line clients
// (`mariadb db < file`, `psql -f`, `sqlite3 db < file`). MySQL's take procedure (006) sets the
// client's delimiter around its body (`DELIMITER //` ... `//`), a command of the client, not SQL:
// a test that sends a file through a driver sends it as the server takes it.

/**
 * A client script as one multi-statement text for the server: the `DELIMITER x` lines dropped, and a
 * statement that ended with the custom delimiter ended with `;` (the server's multi-statement parser
 * reads a CREATE PROCEDURE's body, semicolons and all, as one statement).
 */
export function withoutClientDelimiters(script: string): string {
  let delimiter = ';';
  const lines: string[] = [];
  for (const line of script.split('\n')) {
    const command = /^\s*DELIMITER\s+(\S+)\s*$/i.exec(line);
    if (command !== null) {
      delimiter = command[1] as string;
      continue;
    }
    const trimmed = line.trimEnd();
    lines.push(delimiter !== ';' && trimmed.endsWith(delimiter) ? `${trimmed.slice(0, -delimiter.length).trimEnd()};` : line);
  }
  return lines.join('\n');
}
