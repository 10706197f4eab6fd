import v8 from 'node:v8';
import vm from 'node:vm';
import type { Logger } from 'pino';

type GcFunction = (options?: { type?: 'major'; execution?: 'sync'; flavor?: 'last-resort' }) => void;

/**
 * V8's collector function: the global one when the process was started with `--expose-gc`,
 * else taken once from a fresh context with the flag set just for it (and cleared again, so no
 * other context gets a `gc` global).
 */
function collector(): GcFunction {
  const exposed = (globalThis as { gc?: GcFunction }).gc; // started with --expose-gc
  if (exposed !== undefined) return exposed;
  v8.setFlagsFromString('--expose-gc');
  try {
    return vm.runInNewContext('gc') as GcFunction;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

export type IdleGcOptions = {
  /** Quiet time after which a grown heap is collected; 0 turns the collector off. */
  idleMs: number;
  /** How much the V8 heap must have grown (bytes) since the last collection for one to run. */
  growthBytes?: number;
  /** At most this many requests in `idleMs` still count as quiet (default 20). */
  quietRequests?: number;
  log: Logger;
};

/**
 * Gives back the memory a burst of requests made V8 grow to. Under load V8 enlarges its heap
 * (young generation and old space) and keeps it: once the requests stop, almost nothing is
 * allocated, so no collection runs and the process stays at its peak size. When the server has
 * answered requests, then none for `idleMs`, and the heap is larger than after the last
 * collection by at least `growthBytes`, this runs one full, memory-reducing collection (on an
 * idle server, a pause that grows with the live heap: 376 ms for 203 -> 44 MB on a saturated
 * two-CPU machine). "None" allows a trickle (`quietRequests`
 * per interval: metrics scrapes, probes, agents' long polls). A server under steady traffic is
 * never paused: there is no quiet period.
 */
export class IdleCollector {
  private requests = 0;
  private seen = 0;
  private busy = false;
  private baseline = v8.getHeapStatistics().total_heap_size;
  private readonly growth: number;
  private readonly quiet: number;
  private readonly timer: NodeJS.Timeout | undefined;
  private gc: GcFunction | undefined;
  private readonly log: Logger;
  /** Collections run so far (tests and logs). */
  collections = 0;

  constructor(opts: IdleGcOptions) {
    this.log = opts.log;
    this.growth = opts.growthBytes ?? 32 * 1024 * 1024;
    this.quiet = opts.quietRequests ?? 20;
    if (opts.idleMs <= 0) return;
    this.timer = setInterval(() => this.tick(), opts.idleMs);
    this.timer.unref();
  }

  /** One request arrived (called for every request: a counter, nothing more). */
  request(): void {
    this.requests++;
  }

  /**
   * One check: after an interval with more than `quietRequests` requests (busy), the first
   * interval with at most that many (quiet: a metrics scrape, a health probe, an agent's long
   * poll still count as quiet) collects, if the heap grew.
   */
  tick(): void {
    const n = this.requests - this.seen;
    this.seen = this.requests;
    if (n > this.quiet) {
      this.busy = true;
      return;
    }
    if (!this.busy) return;
    this.busy = false;
    const before = v8.getHeapStatistics().total_heap_size;
    if (before < this.baseline + this.growth) return;
    this.gc ??= collector();
    const started = performance.now();
    this.gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    this.collections++;
    this.baseline = v8.getHeapStatistics().total_heap_size;
    this.log.debug(
      {
        heapBeforeMb: Math.round(before / 2 ** 20),
        heapAfterMb: Math.round(this.baseline / 2 ** 20),
        ms: Math.round(performance.now() - started),
      },
      'idle: heap collected',
    );
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
