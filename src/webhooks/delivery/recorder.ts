import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import * as repo from './repository.ts';
import type { AttemptRecord, ClaimedJob } from './repository.ts';
import type { Outcome } from './sender.ts';
import type { WebhookSettings } from '../settings.ts';
import { maskHeaders } from '../signing.ts';

/** Successful attempts written together: at most this many, or after this many milliseconds. */
const SUCCESS_BATCH = 64;
const SUCCESS_DELAY_MS = 5;
/** A `Retry-After` is honoured up to this long. */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

export type RecorderDeps = {
  em: () => EntityManager;
  settings: WebhookSettings;
  /** Told when a retry falls due, so this server looks for it then. */
  retryAt: (at: number) => void;
};

/**
 * Writes the outcome of attempts. Successes are gathered for a few milliseconds and written in
 * one statement (history rows, the jobs' end, failure counts reset), so a busy server commits
 * once per batch instead of once per delivery; an attempt counts as done when its batch is
 * written. Failures are written one by one with their consequences (retry, disabling).
 */
export class Recorder {
  private readonly d: RecorderDeps;
  private pending: { record: AttemptRecord; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly sincePrune = new Map<number, number>();

  constructor(deps: RecorderDeps) {
    this.d = deps;
  }

  private em(): EntityManager {
    return this.d.em().fork();
  }

  success(record: AttemptRecord): Promise<void> {
    const written = new Promise<void>((resolve, reject) => this.pending.push({ record, resolve, reject }));
    if (this.pending.length >= SUCCESS_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), SUCCESS_DELAY_MS);
    return written.then(() => this.maybePrune(record.job.webhook_id));
  }

  /** Writes the successes gathered so far. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    try {
      await repo.recordSuccesses(
        this.em(),
        batch.map((b) => b.record),
      );
      for (const b of batch) b.resolve();
    } catch (e) {
      for (const b of batch) b.reject(e);
    }
  }

  /**
   * A failed attempt, in one transaction: its history record; the job's next attempt or its end;
   * and, when an event's delivery has failed for good (no automatic attempt left), one failure
   * counted against the webhook, which disables it at the threshold. 410 Gone disables it at once.
   * Pings and redeliveries are the user's own tries: they do not count. Without an outcome only
   * the record is written (an interrupted attempt; the job goes on).
   */
  async failure(record: AttemptRecord, outcome?: Outcome): Promise<void> {
    const { job } = record;
    const s = this.d.settings;
    let retryAt: number | undefined;
    await this.em().transactional(async (tx) => {
      await repo.insertAttempt(tx, record);
      if (outcome === undefined) return;
      const delay = this.retryDelay(job, outcome);
      let reason: string | undefined;
      if (outcome.status === 410) reason = 'the receiver answered 410 Gone';
      else if (delay === undefined && job.kind === 'event') {
        const failures = await repo.countFailure(tx, job.webhook_id);
        if (failures !== undefined && s.disableAfter > 0 && failures >= s.disableAfter) {
          reason = `${failures} consecutive failed deliveries (last: ${outcome.error ?? 'failed'})`;
        }
      }
      if (reason !== undefined) await repo.disable(tx, job.webhook_id, reason, randomUUID());
      if (delay === undefined) await repo.finish(tx, job);
      else {
        await repo.retryLater(tx, job, delay);
        retryAt = Date.now() + delay;
      }
    });
    if (retryAt !== undefined) this.d.retryAt(retryAt);
    if (outcome !== undefined) await this.maybePrune(job.webhook_id);
  }

  /** Milliseconds until the next automatic attempt, or undefined when there is none. */
  private retryDelay(job: ClaimedJob, outcome: Outcome): number | undefined {
    if (job.kind !== 'event' || outcome.status === 410) return undefined;
    const base = this.d.settings.retrySchedule[job.failures];
    if (base === undefined) return undefined;
    const jittered = Math.round(base * (0.9 + Math.random() * 0.2));
    const asked = outcome.retryAfterMs;
    return asked === undefined ? jittered : Math.min(Math.max(jittered, asked), MAX_RETRY_AFTER_MS);
  }

  /** Every ~10% of the cap a webhook's history is trimmed to the cap and the age limit. */
  private async maybePrune(webhookId: number): Promise<void> {
    const { historyMax, historyMaxAgeMs } = this.d.settings;
    const n = (this.sincePrune.get(webhookId) ?? 0) + 1;
    if (n < Math.max(1, Math.floor(historyMax / 10))) {
      this.sincePrune.set(webhookId, n);
      return;
    }
    this.sincePrune.delete(webhookId);
    await repo.prune(this.em(), webhookId, historyMax, historyMaxAgeMs);
  }
}

/** The history record of an attempt (`o` null: no attempt outcome, e.g. an interrupted one). */
export function attemptRecord(
  job: ClaimedJob,
  attempt: number,
  o: Outcome | null,
  requestHeaders: Record<string, string> = {},
): AttemptRecord {
  return {
    job,
    attempt,
    success: o?.success ?? false,
    responseCode: o?.status ?? 0,
    durationMs: o?.durationMs ?? 0,
    error: o?.error ?? null,
    request: { url: job.url, headers: maskHeaders(requestHeaders), body: job.body },
    response: o === null || o.status === 0 ? null : { headers: maskHeaders(o.headers), body: o.body },
  };
}
