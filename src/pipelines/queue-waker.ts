import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';
import { CHANGES_CHANNEL, NOTIFY_CHANNEL } from './model.ts';

/** The first pause before reconnecting a lost listener, doubled after each failed try up to the cap. */
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30_000;

/**
 * Wakes long-polling agents when a pipeline is queued, and the watchers of one pipeline (its page,
 * its live step logs) when it changes, through PostgreSQL LISTEN/NOTIFY on one connection.
 *
 * `seen` counts the wakeups: a caller reads it before it looks at the queue and passes it to
 * `wait`, which then answers at once when a notification came in between (none is lost). A lost
 * listener connection is reconnected with backoff until it is back or the waker is closed; the
 * reconnection counts as a wakeup (notifications meanwhile were missed), and wakes every watcher.
 */
export class QueueWaker {
  private readonly bus = new EventEmitter();
  /** Watchers of pipelines, by pipeline id; 'all' wakes every one (a reconnection). */
  private readonly changes = new EventEmitter();
  private client: pg.Client | undefined;
  private closed = false;
  private wakeups = 0;
  private readonly url: string;
  private readonly log: Logger;

  constructor(url: string, log: Logger) {
    this.url = url;
    this.log = log;
    this.bus.setMaxListeners(0);
    this.changes.setMaxListeners(0);
  }

  /** True from close() on: long polls answer at once instead of waiting. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The wakeups so far: read before looking at the queue, then hand it to `wait`. */
  get seen(): number {
    return this.wakeups;
  }

  async start(): Promise<void> {
    const c = new pg.Client({ connectionString: this.url });
    c.on('notification', (n) => {
      if (n.channel === CHANGES_CHANNEL) this.changes.emit(n.payload ?? '');
      else this.wake();
    });
    c.on('error', (err) => {
      if (this.client !== c) return; // a failed connection attempt: `start` reports it
      this.client = undefined;
      void c.end().catch(() => undefined);
      this.log.warn({ err }, 'pipeline queue listener lost; reconnecting');
      this.reconnect(RECONNECT_FIRST_MS);
    });
    try {
      await c.connect();
      await c.query(`listen ${NOTIFY_CHANNEL}`);
      await c.query(`listen ${CHANGES_CHANNEL}`);
    } catch (e) {
      await c.end().catch(() => undefined);
      throw e;
    }
    if (this.closed) {
      await c.end().catch(() => undefined);
      return;
    }
    this.client = c;
  }

  /**
   * Resolves on the next notification, after `ms`, at shutdown, or when `signal` aborts; at once
   * when a wakeup came after `since` (a value of `seen`).
   */
  wait(ms: number, signal?: AbortSignal, since?: number): Promise<void> {
    if (this.closed || signal?.aborted === true || (since !== undefined && since !== this.wakeups))
      return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.bus.off('wake', done);
        this.bus.off('close', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.bus.on('wake', done);
      this.bus.on('close', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Resolves when pipeline `pipelineId` changes (a notification), after `ms`, at shutdown or when
   * `signal` aborts. Read the state after calling it and before awaiting it, so no change is
   * missed in between.
   */
  changed(pipelineId: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.closed || signal?.aborted === true) return Promise.resolve();
    const key = String(pipelineId);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.changes.off(key, done);
        this.changes.off('all', done);
        this.bus.off('close', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.changes.on(key, done);
      this.changes.on('all', done);
      this.bus.on('close', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.bus.emit('close');
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  private wake(): void {
    this.wakeups += 1;
    this.bus.emit('wake');
  }

  /** Tries to listen again after `delayMs`, and again with a doubled pause while it fails. */
  private reconnect(delayMs: number): void {
    if (this.closed) return;
    setTimeout(() => {
      if (this.closed) return;
      this.start().then(
        () => {
          if (this.client === undefined) return; // closed meanwhile
          this.log.info('pipeline queue listener reconnected');
          this.wake();
          this.changes.emit('all');
        },
        (err: unknown) => {
          const next = Math.min(delayMs * 2, RECONNECT_MAX_MS);
          this.log.warn({ err, retryInMs: next }, 'pipeline queue listener reconnect failed');
          this.reconnect(next);
        },
      );
    }, delayMs).unref();
  }
}
