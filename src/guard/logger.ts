/**
 * Where the guard reports what a human should see. pino, winston, bunyan and `console` all fit.
 * Normal skips are never logged: N−1 replicas lose every tick by design.
 */
export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

export const consoleLogger: Logger = {
  warn: (message) => console.warn(`[cronguard] ${message}`),
  error: (message) => console.error(`[cronguard] ${message}`),
};
