/**
 * What the Events of a waiting step pod tell its step log, and whether they stop the pending
 * timer. Pure functions over the Events the executor's watch collected for one pod.
 */
import type { CoreV1Event } from '@kubernetes/client-node';

/** Event reasons that say why a pod waits (the scheduler, the cluster autoscaler, the kubelet). */
export const REPORTED_REASONS: ReadonlySet<string> = new Set([
  'FailedScheduling',
  'TriggeredScaleUp',
  'NotTriggerScaleUp',
  'FailedMount',
  'FailedAttachVolume',
  'Pulling',
  'Pulled',
  'Failed',
  'BackOff',
  'ErrImageNeverPull',
  'FailedCreatePodSandBox',
]);

/** When the event last happened, in ms (0 when it carries no time). */
export function eventTime(e: CoreV1Event): number {
  const t = e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp;
  return t === undefined ? 0 : new Date(t).getTime();
}

function byTime(events: readonly CoreV1Event[]): CoreV1Event[] {
  return events
    .map((e, i) => ({ e, i, t: eventTime(e) }))
    .sort((a, b) => a.t - b.t || a.i - b.i)
    .map((x) => x.e);
}

/** Reasons about finding a node: moot once the pod has one. */
const SCHEDULING_REASONS = new Set(['FailedScheduling', 'TriggeredScaleUp', 'NotTriggerScaleUp']);

/**
 * The `[triad] <reason>: <message>` lines of the events not said yet (by reason and message, so a
 * repeated event is said once), oldest first; adds what it returns to `said`. Once the pod is
 * `scheduled`, the scheduler's and autoscaler's earlier words are left out (for example a
 * FailedScheduling while the workspace volume was being bound).
 */
export function eventLines(events: readonly CoreV1Event[], said: Set<string>, scheduled = false): string[] {
  const lines: string[] = [];
  for (const e of byTime(events)) {
    const reason = e.reason ?? '';
    if (!REPORTED_REASONS.has(reason) || (scheduled && SCHEDULING_REASONS.has(reason))) continue;
    const message = (e.message ?? '').trim();
    const key = `${reason}\n${message}`;
    if (said.has(key)) continue;
    said.add(key);
    lines.push(`[triad] ${reason}${message === '' ? '' : `: ${message}`}\n`);
  }
  return lines;
}

const PULL_REASONS = new Set(['Pulling', 'Pulled', 'Failed', 'BackOff', 'ErrImageNeverPull']);
const IMAGE = /image "([^"]+)"/;

/**
 * How long a triggered scale-up stops the pending timer: the cluster autoscaler's own default
 * bound on a new node's provisioning (`--max-node-provision-time`, 15 minutes).
 */
export const SCALE_UP_PAUSE_MS = 15 * 60_000;

/**
 * Why the pending timer stands still, if it does: an image is being pulled (its latest pull event
 * is `Pulling`: no `Pulled`, `Failed` or `BackOff` after it), or the cluster autoscaler said it
 * adds a node for the pod (`TriggeredScaleUp` with no `NotTriggerScaleUp` after it) less than
 * SCALE_UP_PAUSE_MS before `now`.
 */
export function pendingPause(
  events: readonly CoreV1Event[],
  now = Date.now(),
): 'pulling' | 'scale-up' | undefined {
  const last = new Map<string, { reason: string; t: number }>();
  let scaleUp: number | undefined;
  for (const e of byTime(events)) {
    const reason = e.reason ?? '';
    if (reason === 'TriggeredScaleUp') scaleUp = eventTime(e);
    if (reason === 'NotTriggerScaleUp') scaleUp = undefined;
    if (!PULL_REASONS.has(reason)) continue;
    const image = IMAGE.exec(e.message ?? '')?.[1];
    if (image === undefined) continue;
    const t = eventTime(e);
    const prev = last.get(image);
    // a pull's end in the same second as its start (event times are whole seconds) ends it
    if (prev !== undefined && prev.t === t && reason === 'Pulling') continue;
    last.set(image, { reason, t });
  }
  if ([...last.values()].some((x) => x.reason === 'Pulling')) return 'pulling';
  return scaleUp !== undefined && now - scaleUp < SCALE_UP_PAUSE_MS ? 'scale-up' : undefined;
}
