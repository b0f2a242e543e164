import { channel } from 'node:diagnostics_channel';

/**
 * The steps of one scheduled fire, from node-cron's timer to the job body: `timer` (the task's
 * heartbeat fired), `fire` (node-cron called the task), `queued` (the acquire was handed to the
 * batcher), `sent` (the store was called with it, alone or in a batch), `probed` (a batch's probe
 * answered, before its take), `answered` (its outcome
 * came back). The job body's start is the caller's to note.
 */
export type FireStep = 'timer' | 'fire' | 'queued' | 'sent' | 'probed' | 'answered';

/** One step, as published on the channel. `at`: performance.timeOrigin + performance.now(), ms. */
export interface FireStepNote {
  readonly step: FireStep;
  /** The jobs the step is for (a batch's `sent` names all of them). */
  readonly names: readonly string[];
  /** The slot (epoch ms), when the step knows it. */
  readonly slot: number | undefined;
  readonly at: number;
}

/**
 * Internal diagnostics, not part of the package's API (src/index.ts does not export it): the
 * bench's tick timeline (test/bench/tick-latency-worker.ts) subscribes to this channel by name to
 * time each step of a fire. With no subscriber a step costs one property read.
 */
export const FIRE_TIMELINE_CHANNEL = 'cronguard:fire-timeline';
const timeline = channel(FIRE_TIMELINE_CHANNEL);

/**
 * Publishes a step of a fire, when someone listens. `names` may be a function, called only then: a
 * batch's names are a new array, which the acquire path does not build for nobody.
 */
export function noteFireStep(
  step: FireStep,
  names: string | readonly string[] | (() => readonly string[]),
  slot?: Date | number | null,
): void {
  if (!timeline.hasSubscribers) return;
  const note: FireStepNote = {
    step,
    names: typeof names === 'string' ? [names] : typeof names === 'function' ? names() : names,
    slot: slot === null || slot === undefined ? undefined : typeof slot === 'number' ? slot : slot.getTime(),
    at: performance.timeOrigin + performance.now(),
  };
  timeline.publish(note);
}
