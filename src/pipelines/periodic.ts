import type { Logger } from 'pino';

/**
 * A background job run every `intervalMs` in one process: a run never overlaps the previous one
 * (a tick that finds it still going is skipped), a failure is logged as `failed` and the next tick
 * tries again, the timer keeps no process alive, and `stop` waits for the run under way.
 */
export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly o: { run: () => Promise<unknown>; log: Logger; failed: string };

  constructor(o: { run: () => Promise<unknown>; log: Logger; failed: string }) {
    this.o = o;
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      if (this.running !== undefined) return; // the previous run is not over
      this.running = this.o
        .run()
        .catch((err: unknown) => this.o.log.warn({ err }, this.o.failed))
        .finally(() => (this.running = undefined));
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.running;
  }
}
