/** The gate's queue is full: the caller should answer 503 and ask the client to come back later. */
export class GateFull extends Error {}

/**
 * A counting gate with FIFO waiters: at most `limit` holders at once, at most `maxQueue` waiting
 * (`GateFull` beyond); a waiter leaves the queue when its signal aborts. Used for the push
 * queues of `RepoChanges`, the transports' shared concurrency cap and the WSGI worker pool.
 */
export class Gate {
  private active = 0;
  private readonly limit: number;
  private readonly maxQueue: number;
  private readonly waiters: (() => void)[] = [];

  constructor(limit: number, maxQueue = Number.POSITIVE_INFINITY) {
    this.limit = Math.max(1, limit);
    this.maxQueue = maxQueue;
  }

  idle(): boolean {
    return this.active === 0 && this.waiters.length === 0;
  }

  /** Holders and waiters right now (for tests and metrics). */
  load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiters.length };
  }

  /** Resolves with the function that leaves the gate (call it exactly once). */
  async enter(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    if (this.active < this.limit && this.waiters.length === 0) this.active += 1;
    else {
      if (this.waiters.length >= this.maxQueue) throw new GateFull('too many requests waiting');
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          const i = this.waiters.indexOf(wake);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        this.waiters.push(wake);
        signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const next = this.waiters.shift();
      if (next !== undefined) next();
      else this.active -= 1;
    };
  }
}
