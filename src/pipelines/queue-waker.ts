import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';
import { NOTIFY_CHANNEL } from './model.ts';

/** Wakes long-polling agents when a pipeline is queued, through PostgreSQL LISTEN/NOTIFY. */
export class QueueWaker {
  private readonly bus = new EventEmitter();
  private client: pg.Client | undefined;
  private closed = false;
  private readonly url: string;
  private readonly log: Logger;

  constructor(url: string, log: Logger) {
    this.url = url;
    this.log = log;
    this.bus.setMaxListeners(0);
  }

  /** True from close() on: long polls answer at once instead of waiting. */
  get isClosed(): boolean {
    return this.closed;
  }

  async start(): Promise<void> {
    const c = new pg.Client({ connectionString: this.url });
    c.on('notification', () => this.bus.emit('wake'));
    c.on('error', (err) => {
      this.log.warn({ err }, 'pipeline queue listener lost; reconnecting');
      this.client = undefined;
      if (!this.closed) setTimeout(() => void this.start().catch(() => undefined), 1000).unref();
    });
    await c.connect();
    await c.query(`listen ${NOTIFY_CHANNEL}`);
    this.client = c;
  }

  /** Resolves on the next notification, after `ms`, at shutdown, or when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.resolve();
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

  async close(): Promise<void> {
    this.closed = true;
    this.bus.emit('close');
    await this.client?.end().catch(() => undefined);
  }
}
