/** A command line the CLI refuses (a bad flag value, an unknown job): exit 2 with its message. */
export class UsageError extends Error {}
