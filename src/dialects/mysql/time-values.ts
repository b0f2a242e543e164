/** A DATETIME(3) literal in UTC: mysql2 would write a Date in the connection's time zone. */
export function mysqlTime(date: Date): string {
  return date.toISOString().slice(0, 23).replace('T', ' ');
}
