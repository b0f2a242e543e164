// Values a job can throw that break naive error handling: text no database stores as is (NUL,
// lone UTF-16 surrogates), and values that cannot be turned into text at all. Shared by
// test/job-errors.test.ts and the hostile-job-errors fault scenario.

/** The longest error text history keeps, in code points. */
export const MAX_ERROR_CODE_POINTS = 4_096;

export interface HostileValue {
  readonly kind: string;
  /** A fresh value to throw. */
  make(): unknown;
  /** The text history must keep for it, when it has a message worth keeping. */
  readonly storedAs?: string;
}

export const HOSTILE_VALUES: readonly HostileValue[] = [
  {
    kind: 'an Error whose message holds NUL',
    make: () => new Error('bad byte \0 in input'),
    storedAs: 'bad byte \uFFFD in input',
  },
  {
    kind: 'an Error with a lone high surrogate',
    make: () => new Error('half \uD83E of a pair'),
    storedAs: 'half \uFFFD of a pair',
  },
  { kind: 'an Error with a lone low surrogate', make: () => new Error('\uDD80 alone'), storedAs: '\uFFFD alone' },
  {
    kind: 'a 10,000-emoji message with NULs',
    make: () => new Error(`\0${'🦀'.repeat(10_000)}`),
    storedAs: `\uFFFD${'🦀'.repeat(MAX_ERROR_CODE_POINTS - 1)}`,
  },
  { kind: 'a string with NUL', make: () => 'thrown \0 string', storedAs: 'thrown \uFFFD string' },
  { kind: 'Object.create(null)', make: () => Object.create(null) as unknown },
  {
    kind: 'a revoked Proxy',
    make: () => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return proxy;
    },
  },
  {
    kind: 'an object whose toString throws',
    make: () => ({
      toString(): string {
        throw new Error('no text for you');
      },
    }),
  },
  {
    kind: 'an Error whose message getter throws',
    make: () =>
      Object.defineProperty(new Error(), 'message', {
        get(): string {
          throw new Error('no message for you');
        },
      }),
  },
  {
    kind: 'an Error whose message is not text',
    make: () => Object.assign(new Error(), { message: Object.create(null) as unknown }),
  },
];

/** Whether every dialect stores `text` as is: well-formed UTF-16, no NUL, at most 4,096 code points. */
export function isStorable(text: unknown): boolean {
  return typeof text === 'string' && text.isWellFormed() && !text.includes('\0') && Array.from(text).length <= MAX_ERROR_CODE_POINTS;
}

/** What `work` rejected with (`rejected: false` when it resolved). Never inspects the value. */
export async function settle(work: Promise<unknown>): Promise<{ rejected: boolean; value: unknown }> {
  try {
    return { rejected: false, value: await work };
  } catch (error) {
    return { rejected: true, value: error };
  }
}
