import { ApiException, type CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, KIND, MERGE, type AgentPool } from './types.ts';

/** Component named in the Events the operator records. */
export const EVENT_SOURCE = 'triad-operator';

export type EventAction =
  { kind: 'create' } | { kind: 'patch'; name: string; count: number } | { kind: 'skip' };

type Seen = { name: string | undefined; count: number; written: number };

/**
 * Which repeats of an Event are written. The same pool, reason and message again within `windowMs`
 * is only counted; after it, the existing Event is patched with the count (as long as the API
 * server keeps it: `keepMs`, under its default event TTL of one hour). A Warning whose reason was
 * written for the pool less than `windowMs` ago with another message is dropped, so a failure
 * whose message changes at every retry writes at most one Event a minute.
 */
export class EventDeduper {
  private readonly seen = new Map<string, Seen>();
  private readonly lastByReason = new Map<string, number>();
  private readonly windowMs: number;
  private readonly keepMs: number;

  constructor(windowMs = 60_000, keepMs = 50 * 60_000) {
    this.windowMs = windowMs;
    this.keepMs = keepMs;
  }

  decide(
    e: { object: string; reason: string; message: string; warning: boolean },
    now = Date.now(),
  ): EventAction {
    for (const [k, s] of this.seen) if (now - s.written > this.keepMs) this.seen.delete(k);
    const key = `${e.object}\n${e.reason}\n${e.message}`;
    const reasonKey = `${e.object}\n${e.reason}`;
    const s = this.seen.get(key);
    if (s !== undefined) {
      s.count += 1;
      if (now - s.written < this.windowMs) return { kind: 'skip' };
      s.written = now;
      this.lastByReason.set(reasonKey, now);
      if (s.name !== undefined) return { kind: 'patch', name: s.name, count: s.count };
      s.count = 1;
      return { kind: 'create' };
    }
    const last = this.lastByReason.get(reasonKey);
    if (e.warning && last !== undefined && now - last < this.windowMs) return { kind: 'skip' };
    this.seen.set(key, { name: undefined, count: 1, written: now });
    this.lastByReason.set(reasonKey, now);
    return { kind: 'create' };
  }

  /** The name of the Event created for a decision (later repeats patch it). */
  created(e: { object: string; reason: string; message: string }, name: string | undefined): void {
    const s = this.seen.get(`${e.object}\n${e.reason}\n${e.message}`);
    if (s !== undefined) s.name = name;
  }
}

/**
 * Records core/v1 Events on AgentPools (what `kubectl describe agentpool` and `kubectl get events`
 * show), de-duplicated by an EventDeduper. Never throws: an Event that cannot be written is logged.
 */
export class EventRecorder {
  private readonly core: CoreV1Api;
  private readonly identity: string;
  private readonly log: Logger;
  private readonly dedup: EventDeduper;

  constructor(core: CoreV1Api, identity: string, log: Logger, dedup = new EventDeduper()) {
    this.core = core;
    this.identity = identity;
    this.log = log;
    this.dedup = dedup;
  }

  async record(pool: AgentPool, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const meta = pool.metadata!;
    const namespace = meta.namespace!;
    const text = message.length > 1024 ? `${message.slice(0, 1021)}...` : message;
    const e = { object: meta.uid ?? `${namespace}/${meta.name}`, reason, message: text };
    const action = this.dedup.decide({ ...e, warning: type === 'Warning' });
    if (action.kind === 'skip') return;
    const now = new Date();
    try {
      if (action.kind === 'patch') {
        try {
          await this.core.patchNamespacedEvent(
            { name: action.name, namespace, body: { count: action.count, lastTimestamp: now } },
            MERGE,
          );
          return;
        } catch (err) {
          if (!(err instanceof ApiException && err.code === 404)) throw err;
          // expired on the API server: a new one
        }
      }
      const body: CoreV1Event = {
        metadata: {
          name: `${meta.name!}.${now.getTime().toString(16)}${Math.random().toString(16).slice(2, 8)}`,
          namespace,
        },
        involvedObject: {
          apiVersion: API_VERSION,
          kind: KIND,
          name: meta.name,
          namespace,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
        },
        type,
        reason,
        message: text,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: EVENT_SOURCE },
        reportingComponent: `triad.dev/${EVENT_SOURCE}`,
        reportingInstance: this.identity.slice(0, 128),
        action: type === 'Warning' ? 'Reconcile' : 'Scale',
      };
      const created = await this.core.createNamespacedEvent({ namespace, body });
      this.dedup.created(e, created.metadata?.name);
    } catch (err) {
      this.dedup.created(e, undefined);
      this.log.warn(
        { pool: `${namespace}/${meta.name}`, reason, err: err instanceof Error ? err.message : String(err) },
        'could not record an event',
      );
    }
  }
}

export type ScaleCause = {
  /** spec.replicas when it pins the pool. */
  pinned?: number | undefined;
  /** The queue figures of the pool's label set (undefined: not known yet). */
  figures?: { pending: number; running: number } | undefined;
  capacity: number;
  min: number;
  max: number;
  busy: number;
  /** scaleDownDelaySeconds, named on a scale-down. */
  delaySeconds: number;
};

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The message of a ScaledUp/ScaledDown Event: the figures that made the decision. */
export function scaleMessage(from: number, to: number, c: ScaleCause): string {
  const head = `${from} → ${to}: `;
  if (c.pinned !== undefined) return `${head}spec.replicas pins the pool at ${c.pinned}`;
  if (c.figures === undefined)
    return `${head}minReplicas ${c.min}, maxReplicas ${c.max} (the queue figures are not known yet)`;
  const { pending, running } = c.figures;
  const parts = [
    `${plural(pending, 'pipeline', 'pipelines')} waiting and ${running} running, capacity ${c.capacity} per agent`,
  ];
  const need = Math.ceil((pending + running) / Math.max(1, c.capacity));
  if (c.busy > need) parts.push(`${plural(c.busy, 'agent', 'agents')} busy`);
  const asked = Math.max(need, c.busy);
  // (a count above maxReplicas, left by spec.replicas, comes down to it at once)
  const capped = to === c.max && (asked > c.max || from > c.max);
  if (capped) parts.push(`at most ${c.max} (maxReplicas)`);
  if (asked < c.min && to === c.min) parts.push(`at least ${c.min} (minReplicas)`);
  if (to < from && !capped) parts.push(`after ${c.delaySeconds} s with less work`);
  return head + parts.join(', ');
}
