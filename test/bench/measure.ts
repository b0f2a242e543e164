// Timing for the benchmark: every comparison is a ratio of two series measured in the same run,
// interleaved A B A B, so that the machine's noise falls on both alike.

/** Percentiles of a series, in microseconds. */
export interface Summary {
  readonly p50: number;
  readonly p99: number;
  readonly samples: number;
}

export function summarize(samplesUs: number[]): Summary {
  const sorted = [...samplesUs].sort((a, b) => a - b);
  const at = (fraction: number): number => sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
  return { p50: at(0.5), p99: at(0.99), samples: sorted.length };
}

async function timeOnce(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1_000;
}

/** Runs `a` and `b` alternately, after a warm-up of each; returns both series. */
export async function interleaved(
  iterations: number,
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
): Promise<{ a: Summary; b: Summary; ratio: number }> {
  const warmUp = Math.max(5, Math.floor(iterations / 10));
  for (let i = 0; i < warmUp; i += 1) {
    await a();
    await b();
  }
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < iterations; i += 1) {
    as.push(await timeOnce(a));
    bs.push(await timeOnce(b));
  }
  const sa = summarize(as);
  const sb = summarize(bs);
  return { a: sa, b: sb, ratio: sa.p50 / sb.p50 };
}

/** One series alone, after a warm-up. */
export async function series(iterations: number, fn: () => Promise<unknown>): Promise<Summary> {
  for (let i = 0; i < Math.max(5, Math.floor(iterations / 10)); i += 1) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i += 1) samples.push(await timeOnce(fn));
  return summarize(samples);
}

export function us(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(0)} µs` : '-';
}

export function ratio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : '-';
}
