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
  private readonly onFull: (() => void) | undefined;

  /** `onFull` is told of each refusal (`GateFull`), for metrics. */
  constructor(limit: number, maxQueue = Number.POSITIVE_INFINITY, onFull?: () => void) {
    this.limit = Math.max(1, limit);
    this.maxQueue = maxQueue;
    this.onFull = onFull;
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
      if (this.waiters.length >= this.maxQueue) {
        this.onFull?.();
        throw new GateFull('too many requests waiting');
      }
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

/**
 * `source` read while holding a place in a gate: `leave` is called once, when the stream ends or
 * fails, when its reader abandons it (`return` or `throw`, also before the first read, when a
 * generator's own `finally` would never run), or when `signal` aborts (the caller stops the
 * source's work with the same signal).
 */
export function holdWhileRead<T>(
  source: AsyncIterable<T>,
  leave: () => void,
  signal: AbortSignal,
): AsyncIterableIterator<T> {
  const it = source[Symbol.asyncIterator]();
  const end = () => {
    signal.removeEventListener('abort', end);
    leave();
  };
  if (signal.aborted) end();
  else signal.addEventListener('abort', end, { once: true });
  const held: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => held,
    next: async () => {
      try {
        const r = await it.next();
        if (r.done === true) end();
        return r;
      } catch (e) {
        end();
        throw e;
      }
    },
    return: async (value?: unknown) => {
      try {
        await it.return?.(value);
      } finally {
        end();
      }
      return { done: true, value: undefined };
    },
    throw: async (e?: unknown) => {
      try {
        await it.return?.();
      } finally {
        end();
      }
      throw e;
    },
  };
  return held;
}
