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

/** The user's logger, made unable to throw into the guard (a throwing logger would skip a release). */
export function safeLogger(logger: Logger): Logger {
  return {
    warn: (message) => {
      try {
        logger.warn(message);
      } catch {
        // A logger that throws cannot be told so; the guard carries on.
      }
    },
    error: (message) => {
      try {
        logger.error(message);
      } catch {
        // As above.
      }
    },
  };
}
