import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { claimUndispatched, markDispatched, type OutboxEvent } from '../../events/outbox.ts';
import { oldestUndispatchedAge } from '../../events/repository.ts';
import { inSpan } from '../../telemetry/spans.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { insertJobs, type NewJob } from '../repository.ts';
import * as repo from './repository.ts';
import type { ClaimedJob } from './repository.ts';
import {
  envelope,
  repositoryInfo,
  type RepoFacts,
  type SenderInfo,
  type WebhookLookups,
} from '../envelope.ts';
import { Sender } from './sender.ts';
import type { WebhookSettings } from '../settings.ts';
import { deliveryHeaders } from '../signing.ts';
import { deliveredAs, payloadFor } from '../earlier.ts';
import { Recorder, attemptRecord } from './recorder.ts';

export type DispatcherDeps = {
  em: () => EntityManager;
  databaseUrl: string;
  log: Logger;
  metrics: Metrics;
  settings: WebhookSettings;
  lookups: WebhookLookups;
};

/** The outbox channel `emitEvents` notifies after writing events. */
const OUTBOX_CHANNEL = 'triad_outbox';
/** Outbox rows fanned out per transaction. */
const FAN_OUT_BATCH = 200;
/** The safety net: look for due work this often even without a notification. */
const SWEEP_MS = 30_000;
/** Whole-table history pruning by age, this often. */
const PRUNE_MS = 10 * 60_000;
const INTERRUPTED = 'interrupted: the server stopped before this attempt finished';

/**
 * Delivers webhooks from the transactional outbox; any number of replicas run one each.
 *
 * Fan-out: outbox rows are claimed with `FOR UPDATE SKIP LOCKED`, turned into one job per
 * subscribed webhook (each with its delivery id and the exact body it will always carry) and
 * marked dispatched in the same transaction. Jobs: a due job is claimed with `FOR UPDATE SKIP
 * LOCKED` under a lease (its due time moves to the lease's end), sent, and its outcome written
 * with the job's end or its next attempt. A replica that dies mid-attempt leaves a job that falls
 * due when the lease ends; the next claim records the interrupted attempt and sends it again (at
 * least once). Woken by the outbox NOTIFY, by its own timer for the next due job, and every 30 s.
 */
export class Dispatcher {
  private readonly d: DispatcherDeps;
  private readonly sender: Sender;
  private readonly leaseMs: number;
  private readonly delivered: Counter<'result'>;
  private listener: pg.Client | undefined;
  private loopDone: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private stopping = false;
  private woken = false;
  private backlog = false;
  private sleeper: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private pruneTimer: NodeJS.Timeout | undefined;
  private readonly recorder: Recorder;
  private readonly hookLoad = new Map<number, number>();
  /** Attempts one webhook may have under way on this replica (a quarter of the concurrency). */
  private readonly perHook: number;

  constructor(deps: DispatcherDeps) {
    this.d = deps;
    const s = deps.settings;
    this.sender = new Sender({ policy: s.allowedHosts, timeoutMs: s.timeoutMs, maxSockets: s.concurrency });
    this.leaseMs = s.timeoutMs + Math.max(5_000, s.timeoutMs);
    this.perHook = Math.max(1, Math.ceil(s.concurrency / 4));
    this.recorder = new Recorder({ em: deps.em, settings: s, retryAt: (at) => this.wakeAt(at) });
    this.delivered = deps.metrics.counter(
      'triad_webhook_deliveries_total',
      'Webhook delivery attempts by result',
      ['result'],
    );
    deps.metrics.clusterGauge('triad_webhook_jobs_queued', 'Webhook deliveries waiting for an attempt', () =>
      repo.queued(this.em()),
    );
    deps.metrics.clusterGauge(
      'triad_webhook_delivery_lag_seconds',
      'Age of the oldest webhook delivery still to make (first attempt or retry)',
      () => repo.oldestPendingAge(this.em()),
    );
    deps.metrics.clusterGauge(
      'triad_outbox_lag_seconds',
      'Age of the oldest event recorded but not yet turned into webhook deliveries',
      () => oldestUndispatchedAge(this.em()),
    );
  }

  private em(): EntityManager {
    return this.d.em().fork();
  }

  async start(): Promise<void> {
    this.stopping = false;
    await this.listen();
    this.loopDone = this.loop();
    this.pruneTimer = setInterval(() => {
      repo.pruneOld(this.em(), this.d.settings.historyMaxAgeMs).catch((err: unknown) => {
        this.d.log.warn({ err }, 'webhook history pruning failed');
      });
    }, PRUNE_MS);
    this.pruneTimer.unref();
  }

  /** Stops claiming, lets attempts under way finish (each within its deadline), and disconnects. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.pruneTimer);
    this.wake();
    await this.loopDone;
    await this.recorder.flush();
    await Promise.allSettled([...this.inFlight]);
    clearTimeout(this.timer);
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => undefined);
    this.sender.close();
  }

  /** Look for work now (new jobs from this replica: redeliveries, pings, re-enabled webhooks). */
  wake(): void {
    this.woken = true;
    const s = this.sleeper;
    this.sleeper = undefined;
    s?.();
  }

  private async listen(): Promise<void> {
    const c = new pg.Client({ connectionString: this.d.databaseUrl });
    c.on('notification', () => this.wake());
    c.on('error', (err) => {
      if (this.stopping) return;
      this.d.log.warn({ err }, 'webhook dispatcher lost its LISTEN connection; reconnecting');
      this.listener = undefined;
      c.end().catch(() => undefined);
      setTimeout(() => {
        if (this.stopping) return;
        this.listen().then(
          () => this.wake(),
          () => c.emit('error', new Error('reconnect failed')),
        );
      }, 1000).unref();
    });
    await c.connect();
    await c.query(`listen ${OUTBOX_CHANNEL}`);
    this.listener = c;
  }

  private free(): number {
    return this.d.settings.concurrency - this.inFlight.size;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      let more = false;
      try {
        const fanned = await this.fanOut();
        // At most one webhook's share per claim, so a slow receiver cannot take every slot.
        const room = Math.min(this.free(), this.perHook);
        const busy = [...this.hookLoad].filter(([, n]) => n >= this.perHook).map(([id]) => id);
        const claimed = room > 0 ? await this.claimDue(room, busy) : 0;
        more = fanned === FAN_OUT_BATCH || (room > 0 && claimed === room);
        // Work may be waiting for a slot or for a busy webhook: the next attempt to end looks again.
        this.backlog = more || room <= 0 || busy.length > 0;
        if (!more && !this.woken) {
          const due = await repo.nextDue(this.em(), busy);
          this.wakeAt(due === null ? Date.now() + SWEEP_MS : Math.min(due.getTime(), Date.now() + SWEEP_MS));
        }
      } catch (err) {
        if (this.stopping) break;
        this.d.log.warn({ err }, 'webhook dispatcher pass failed; retrying in 1 s');
        this.wakeAt(Date.now() + 1000);
      }
      if (more || this.woken || this.stopping) continue;
      await new Promise<void>((resolve) => (this.sleeper = resolve));
    }
  }

  /** Makes sure the loop looks again at `at` at the latest. */
  private wakeAt(at: number): void {
    if (at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timerAt = Infinity;
        this.wake();
      },
      Math.max(0, at - Date.now()),
    );
    this.timer.unref();
  }

  /** Turns undispatched outbox events into jobs; those this replica has room for start at once. */
  private async fanOut(): Promise<number> {
    const mine: ClaimedJob[] = [];
    const lease = randomUUID();
    const count = await this.em().transactional(async (tx) => {
      const events = await claimUndispatched(tx, FAN_OUT_BATCH);
      if (events.length === 0) return 0;
      const attributes = { 'outbox.events': events.length };
      const jobs = await inSpan('outbox.dispatch', { attributes }, () => this.jobsFor(tx, events));
      let room = Math.max(0, this.free());
      const taken = new Map<number, number>();
      const [now, later] = [[] as typeof jobs, [] as typeof jobs];
      for (const j of jobs) {
        const hook = j.job.webhookId;
        if (room > 0 && this.load(hook) + (taken.get(hook) ?? 0) < this.perHook) {
          now.push(j);
          taken.set(hook, (taken.get(hook) ?? 0) + 1);
          room -= 1;
        } else later.push(j);
      }
      const ids = await insertJobs(
        tx,
        now.map((j) => j.job),
        { id: lease, ms: this.leaseMs },
      );
      await insertJobs(
        tx,
        later.map((j) => j.job),
      );
      await markDispatched(
        tx,
        events.map((e) => e.id),
      );
      now.forEach(({ job, url, secret }, i) =>
        mine.push({
          id: ids[i]!,
          webhook_id: job.webhookId,
          delivery_id: job.deliveryId,
          event_id: job.eventId,
          event_type: job.eventType,
          body: job.body,
          kind: job.kind,
          attempt: 1,
          failures: 0,
          lease,
          old_lease: null,
          url,
          secret,
          is_active: true,
        }),
      );
      return events.length;
    });
    for (const j of mine) this.launch(j);
    return count;
  }

  private async jobsFor(
    tx: EntityManager,
    events: OutboxEvent[],
  ): Promise<{ job: NewJob; url: string; secret: string | null }[]> {
    const repoIds = [...new Set(events.flatMap((e) => (e.repo_id === null ? [] : [e.repo_id])))];
    const repos =
      repoIds.length === 0 ? new Map<number, RepoFacts>() : await this.d.lookups.repositories(repoIds);
    const orgIds = [...new Set([...repos.values()].map((r) => r.orgId))];
    const hooks = repos.size === 0 ? [] : await repo.activeFor(tx, [...repos.keys()], orgIds);
    const matches = events.flatMap((e) => {
      const r = e.repo_id === null ? undefined : repos.get(e.repo_id);
      if (r === undefined) return [];
      const created = new Date(e.created_at).getTime();
      return hooks
        .filter(
          (h) =>
            (h.repo_id === r.id || (h.repo_id === null && h.org_id === r.orgId)) &&
            h.events.includes(deliveredAs(e.event_type, h.api_variant)) &&
            new Date(h.created_at).getTime() <= created,
        )
        .map((h) => ({ e, r, h }));
    });
    if (matches.length === 0) return [];
    const senderIds = [...new Set(matches.flatMap(({ e }) => (e.sender_id === null ? [] : [e.sender_id])))];
    const senders =
      senderIds.length === 0 ? new Map<number, SenderInfo>() : await this.d.lookups.senders(senderIds);
    return matches.map(({ e, r, h }) => {
      const deliveryId = randomUUID();
      // the event as the webhook's variant names and shapes it
      const eventType = deliveredAs(e.event_type, h.api_variant);
      const body = envelope({
        event: eventType,
        deliveryId,
        repository: repositoryInfo(r),
        sender: (e.sender_id === null ? undefined : senders.get(e.sender_id)) ?? null,
        timestamp: new Date(e.created_at),
        payload: payloadFor(e.event_type, e.payload, h.api_variant),
      });
      return {
        job: {
          webhookId: h.id,
          deliveryId,
          eventId: e.id,
          eventType,
          body,
          kind: 'event',
          attempt: 0,
        },
        url: h.url,
        secret: h.secret,
      };
    });
  }

  private async claimDue(limit: number, busy: number[]): Promise<number> {
    const jobs = await repo.claim(this.em(), randomUUID(), this.leaseMs, limit, busy);
    for (const j of jobs) this.launch(j);
    return jobs.length;
  }

  /** Attempts under way for one webhook on this replica. */
  private load(webhookId: number): number {
    return this.hookLoad.get(webhookId) ?? 0;
  }

  private launch(job: ClaimedJob): void {
    const hook = job.webhook_id;
    this.hookLoad.set(hook, this.load(hook) + 1);
    const attributes = {
      'webhook.id': hook,
      'webhook.event': job.event_type,
      'webhook.delivery': job.delivery_id,
      'webhook.attempt': job.attempt,
    };
    const p = inSpan('webhook.deliver', { attributes }, () => this.attempt(job))
      .catch((err: unknown) =>
        this.d.log.error({ err, job: job.id }, 'webhook attempt could not be recorded'),
      )
      .finally(() => {
        this.inFlight.delete(p);
        const n = this.load(hook) - 1;
        if (n > 0) this.hookLoad.set(hook, n);
        else this.hookLoad.delete(hook);
        if (this.backlog) this.wake();
      });
    this.inFlight.add(p);
  }

  private async attempt(job: ClaimedJob): Promise<void> {
    if (job.old_lease !== null) {
      // The replica that had this attempt under way stopped before recording it.
      await this.recorder.failure({ ...attemptRecord(job, job.attempt - 1, null), error: INTERRUPTED });
    }
    if (!job.is_active && job.kind === 'event') {
      await repo.pauseJob(this.em(), job);
      return;
    }
    const body = Buffer.from(job.body, 'utf8');
    const headers = deliveryHeaders({
      eventType: job.event_type,
      deliveryId: job.delivery_id,
      attempt: job.attempt,
      secret: job.secret,
      body,
      now: Math.floor(Date.now() / 1000),
    });
    const outcome = await this.sender.send(job.url, headers, body);
    const record = attemptRecord(job, job.attempt, outcome, headers);
    this.delivered.inc({ result: outcome.success ? 'success' : 'failure' });
    if (outcome.success) await this.recorder.success(record);
    else await this.recorder.failure(record, outcome);
  }
}
