// The fire timeline (issue #34): where the time goes between a slot and the job body. Figure 7's
// replicas, with `timeline` on, note each step of every fire (src/core/fire-timeline.ts: node-
// cron's timer, its call of the task, the acquire queued, sent, answered; the worker notes the
// body), on the performance clock (timeOrigin + now()). Plain node-cron tasks run beside them in
// the same run, as the floor. `npm run bench -- --only timeline [--timeline-cron minute|second]
// [--timeline-slots N] [--dialects postgres,mysql,sqlite]` prints the tables.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DialectName } from '../../src/index.js';
import type { FireStep } from '../../src/core/fire-timeline.js';
import { summarize } from './measure.js';
import { tickLatency, type TickLatencyFigure } from './tick-latency.js';

/** A step as the worker keeps it: the guard's own steps, and `body` (with Date.now() beside it). */
export interface TimelineNote {
  readonly step: FireStep | 'body';
  readonly names: readonly string[];
  readonly slot: number | undefined;
  readonly at: number;
  readonly wall?: number;
}

const STEPS: readonly (FireStep | 'body')[] = ['timer', 'fire', 'queued', 'sent', 'probed', 'answered', 'body'];

export interface TimelineSize {
  readonly cron: 'minute' | 'second';
  /** pg-boss and graphile-worker on the same server at the same time, as in figure 7 (PostgreSQL only). */
  readonly peers?: boolean;
  readonly jobs: number;
  readonly slots: number;
}

export interface TimelineFigure {
  readonly dialect: DialectName;
  readonly size: TimelineSize;
  readonly uptimeBefore: string;
  readonly uptimeAfter: string;
  readonly figure: TickLatencyFigure;
}

function uptime(): string {
  return execFileSync('uptime', { encoding: 'utf8' })
    .trim()
    .replace(/^.*load average/, 'load average');
}

export async function fireTimeline(dialect: DialectName, url: string, size: TimelineSize): Promise<TimelineFigure> {
  const uptimeBefore = uptime();
  const peers = size.peers === true && dialect === 'postgres' ? (['pg-boss', 'graphile-worker'] as const) : [];
  const figure = await tickLatency(url, { ...size, systems: ['cronguard', 'node-cron', ...peers], timeline: true });
  return { dialect, size, uptimeBefore, uptimeAfter: uptime(), figure };
}

function ms(value: number): string {
  return Number.isFinite(value) ? value.toFixed(1) : '-';
}

/** p50 / max of `samples`, in ms. */
function cell(samples: number[]): string {
  if (samples.length === 0) return '-';
  return `${ms(summarize(samples).p50)} / ${ms(Math.max(...samples))}`;
}

/** One run with its dialect and the machine's load before and after, then its table. */
export function fireTimelineLines(result: TimelineFigure): string[] {
  const { figure } = result;
  const cronguard = figure.systems.find((s) => s.system === 'cronguard');
  const plain = figure.systems.find((s) => s.system === 'node-cron');
  return [
    `${result.dialect}, \`${figure.expression}\`, ${figure.jobs} jobs × ${figure.slots} slots, ${figure.replicas} guarded replicas beside ${figure.replicas} node-cron-only processes; ` +
      `${result.uptimeBefore} before, ${result.uptimeAfter} after. Guarded: ${cronguard?.started ?? 0} started, ${cronguard?.duplicates ?? 0} duplicates, ${cronguard?.missed ?? 0} missed; ` +
      `node-cron alone: ${plain?.started ?? 0} started.`,
    '',
    ...timelineTableLines(figure),
  ];
}

/**
 * The table of one figure 7 run with `timeline` on: per step, ms from the slot, over every
 * replica's fire and over the winner's, and the node-cron-only processes' bodies beside.
 */
export function timelineTableLines(figure: TickLatencyFigure): string[] {
  const slots = new Set(figure.slotTimes);
  /** The first note of each (system, replica, step, job, slot). */
  const first = new Map<string, number>();
  const winners = new Set<string>();
  let clockGap = 0;
  for (const { system, replica, note } of figure.steps) {
    if (note.slot === undefined || !slots.has(note.slot)) continue;
    // node-cron's timer and call: the replica's first of the slot, which fires every task due then
    // (slot-fires.ts); the other tasks' own timers come after, and find their slot fired.
    for (const name of note.step === 'timer' || note.step === 'fire' ? ['*'] : note.names) {
      const key = `${system}|${replica}|${note.step}|${name}|${note.slot}`;
      const seen = first.get(key);
      if (seen === undefined || note.at < seen) first.set(key, note.at);
      if (note.step === 'body') {
        winners.add(`${system}|${replica}|${name}|${note.slot}`);
        winners.add(`${system}|${replica}|*|${note.slot}`);
      }
    }
    if (note.wall !== undefined) clockGap = Math.max(clockGap, Math.abs(note.wall - note.at));
  }
  const samples = (system: string, step: string, winnerOnly: boolean): number[] => {
    const out: number[] = [];
    for (const [key, at] of first) {
      const [s, replica, st, name, slot] = key.split('|');
      if (s !== system || st !== step) continue;
      if (winnerOnly && !winners.has(`${s}|${replica}|${name}|${slot}`)) continue;
      out.push(at - Number(slot));
    }
    return out;
  };
  const perReplica = (system: string, step: string): string =>
    Array.from({ length: figure.replicas }, (_, replica) => {
      const out: number[] = [];
      for (const [key, at] of first) {
        const [s, r, st, , slot] = key.split('|');
        if (s === system && st === step && Number(r) === replica) out.push(at - Number(slot));
      }
      return out.length === 0 ? '-' : ms(summarize(out).p50);
    }).join(' / ');
  return [
    '| step (ms from the slot; timer and fire: the first task of the slot) | every replica p50 / max | the winner p50 / max | p50 per replica |',
    '| --- | --- | --- | --- |',
    ...STEPS.map(
      (step) =>
        `| ${step} | ${cell(samples('cronguard', step, false))} | ${cell(samples('cronguard', step, true))} | ${perReplica('cronguard', step)} |`,
    ),
    `| node-cron alone: body | ${cell(samples('node-cron', 'body', false))} | | ${perReplica('node-cron', 'body')} |`,
    ...figure.systems
      .filter((s) => s.system === 'pg-boss' || s.system === 'graphile-worker')
      .map((s) => `| ${s.system} beside: body | ${ms(s.latencyMs.p50)} / ${ms(s.latencyMs.p99)} (p50 / p99) | | |`),
    '',
    `Largest gap between Date.now() and the performance clock at a body: ${ms(clockGap)} ms.`,
    '',
  ];
}

/** The timeline on the dialects given, one after the other, each printed as it ends. */
export async function fireTimelineOn(targets: readonly [DialectName, string][], size: TimelineSize): Promise<void> {
  for (const [dialect, url] of targets) {
    console.error(`cronguard bench: fire timeline on ${dialect}…`);
    const result = await fireTimeline(dialect, url, size);
    // Every note, for a look beyond the table.
    const raw = join(tmpdir(), `cronguard-timeline-${dialect}-${size.cron}-${Date.now()}.json`);
    writeFileSync(raw, JSON.stringify(result));
    console.error(`cronguard bench: the notes are in ${raw}`);
    console.log(fireTimelineLines(result).join('\n'));
  }
}
