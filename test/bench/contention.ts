// Figure 5: OS processes × contenders each race for every (job, slot) lock; decisions per second,
// and a check that every lock had exactly one winner.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createGuard } from '../../src/index.js';

export interface ContentionFigure {
  readonly processes: number;
  readonly contenders: number;
  readonly names: number;
  readonly slots: number;
  readonly decisionsPerSecond: number;
  readonly locks: number;
  readonly exactlyOneWinner: number;
  readonly errors: number;
}

type Done = { type: 'done'; wins: string[]; decisions: number; errors: number; seconds: number };

export async function contention(
  url: string,
  processes: number,
  contenders: number,
  names: number,
  slots: number,
): Promise<ContentionFigure> {
  const prefix = `contention_${Date.now()}_`;
  const setup = createGuard({
    database: url,
    tablePrefix: prefix,
    logger: { warn: () => undefined, error: () => undefined },
  });
  await setup.migrate();
  await setup.close();
  const worker = fileURLToPath(new URL('contention-worker.ts', import.meta.url));
  const children = Array.from({ length: processes }, () =>
    fork(worker, [url, prefix, String(names), String(slots), String(contenders)], { execArgv: ['--import', 'tsx'] }),
  );
  await Promise.all(children.map((child) => new Promise((resolve) => child.once('message', resolve))));
  const started = performance.now();
  const done = Promise.all(
    children.map((child) => new Promise<Done>((resolve) => child.once('message', (message) => resolve(message as Done)))),
  );
  for (const child of children) child.send('go');
  const reports = await done;
  const seconds = (performance.now() - started) / 1_000;
  const winners = new Map<string, number>();
  for (const name of reports.flatMap((report) => report.wins)) winners.set(name, (winners.get(name) ?? 0) + 1);
  const locks = names * slots;
  const exactlyOneWinner = [...winners.values()].filter((count) => count === 1).length;
  const decisions = reports.reduce((sum, report) => sum + report.decisions, 0);
  return {
    processes,
    contenders,
    names,
    slots,
    decisionsPerSecond: decisions / seconds,
    locks,
    exactlyOneWinner,
    errors: reports.reduce((sum, report) => sum + report.errors, 0),
  };
}
