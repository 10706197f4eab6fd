import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { backoff, retryable, ServerClient, sleep, withRetry } from './client.ts';
import { LogLimiter } from './log-limit.ts';
import { AgentMetrics } from './metrics.ts';
import { LogShipper } from './log-shipper.ts';
import { pipelineSpan, stepSpan } from './tracing.ts';
import type { Executor, Job, JobStep } from './types.ts';
import { refusedSteps, reportRefused, type StepResources } from './step-resources.ts';
import { formatDuration } from '../src/pipelines/pipeline-file.ts';

export type AgentOptions = {
  server: string;
  token: string;
  instance: string;
  capacity: number;
  executor: Executor;
  log: Logger;
  /** Seconds a poll may wait on the server (long poll). */
  pollWait?: number;
  /** Heartbeat period when idle; while pipelines run the agent checks for cancellation every `cancelCheckMs`. */
  heartbeatMs?: number;
  cancelCheckMs?: number;
  /** SIGTERM: how long running pipelines may finish before they are cancelled. */
  drainMs?: number;
  /** After the drain: how long the reports of cancelled pipelines may be retried before the agent gives up. */
  stopGraceMs?: number;
  /** Port of /metrics and /healthz; undefined = no HTTP server. */
  metricsPort?: number;
  sweepMs?: number;
  labels?: string; // pool labels (`k=v,...`) polled with: pipelines with exactly these
  maxResources?: StepResources; // the most a step may ask for (step-resources.ts); unset keys: unbounded
};

type Running = {
  job: Job;
  abort: AbortController;
  cancelled: boolean;
  /** The pipeline ran past its time limit (`pipeline_timeout_seconds`) and was stopped. */
  timedOut: boolean;
  /** Its final status is reported (only the workspace cleanup is left). */
  reported: boolean;
  done: Promise<void>;
};

const now = () => new Date().toISOString();
/** A `Running`'s `done` until its run starts. */
const SETTLED = Promise.resolve();

/**
 * The CI agent: long-polls the server for pipelines (up to `capacity` at once), runs their steps
 * in order with an executor, ships logs losslessly, reports statuses, heartbeats, and drains on
 * SIGTERM.
 */
export class Agent {
  private readonly o: Required<Omit<AgentOptions, 'metricsPort' | 'labels'>> & {
    metricsPort: number | undefined;
  };
  private readonly api: ServerClient;
  private readonly running = new Map<number, Running>();
  private stopping = false;
  private readonly pollAbort = new AbortController();
  /** Aborted when stop() gives up on the server: every call and retry ends at once. */
  private readonly hardStop = new AbortController();
  /** Identifies this process to the server (a restart under the same instance name gets a new one). */
  readonly nonce = randomBytes(16).toString('hex');
  private loopDone: Promise<void> | undefined;
  private slotFreed: (() => void) | undefined;
  private timers: NodeJS.Timeout[] = [];
  private readonly m: AgentMetrics;

  constructor(opts: AgentOptions) {
    this.o = {
      ...{ pollWait: 30, heartbeatMs: 10_000, cancelCheckMs: 2_000, drainMs: 60_000 },
      ...{ stopGraceMs: 5_000, sweepMs: 300_000, maxResources: {} },
      ...opts,
      metricsPort: opts.metricsPort,
    };
    const { server, token, instance, labels } = opts;
    this.api = new ServerClient(server, token, instance, this.nonce, this.hardStop.signal, labels);
    this.m = new AgentMetrics(opts.capacity);
  }

  get port(): number | undefined {
    return this.m.port;
  }

  get runningCount(): number {
    return this.running.size;
  }

  async start(): Promise<void> {
    if (this.o.metricsPort !== undefined) await this.m.serve(this.o.metricsPort);
    await this.sweep();
    // Now (not awaited): the server learns this nonce replaced its instance's earlier process.
    void this.heartbeat();
    // Every heartbeatMs idle, every cancelCheckMs while running (cancellations stop steps quickly).
    let last = 0;
    this.schedule(
      async () => {
        if (this.running.size === 0 && Date.now() - last < this.o.heartbeatMs) return;
        last = Date.now();
        await this.heartbeat();
      },
      () => Math.min(this.o.cancelCheckMs, this.o.heartbeatMs),
    );
    if (this.o.executor.sweep !== undefined) {
      this.schedule(
        () => this.sweep(),
        () => this.o.sweepMs,
      );
    }
    this.loopDone = this.loop();
  }

  /** Runs `fn` repeatedly, waiting `every()` between runs (re-read each time). */
  private schedule(fn: () => Promise<void>, every: () => number): void {
    const tick = () => {
      if (this.stopping && this.running.size === 0) return;
      fn()
        .catch(() => undefined)
        .finally(() => {
          const t = setTimeout(tick, every());
          t.unref();
          this.timers.push(t);
        });
    };
    const t = setTimeout(tick, every());
    t.unref();
    this.timers.push(t);
  }

  private async sweep(): Promise<void> {
    await this.o.executor.sweep?.(new Set(this.running.keys())).catch((err: unknown) => {
      this.o.log.warn({ err }, 'sweep failed');
    });
  }

  private async heartbeat(): Promise<void> {
    try {
      const running = [...this.running.values()].filter((r) => !r.reported).map((r) => r.job.pipeline_id);
      const cancelled = await this.api.heartbeat(running, Math.max(5_000, this.o.heartbeatMs));
      this.o.log.debug({ cancelled }, 'heartbeat');
      for (const id of cancelled) {
        const r = this.running.get(id);
        if (r !== undefined && !r.cancelled && !r.reported) {
          this.o.log.info({ pipeline: id }, 'pipeline cancelled or errored on the server: stopping it');
          r.cancelled = true;
          r.abort.abort();
        }
      }
    } catch (err) {
      this.o.log.warn({ err: String(err) }, 'heartbeat failed');
    }
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      if (this.running.size >= this.o.capacity) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        continue;
      }
      try {
        const job = await this.api.poll(this.o.pollWait, this.pollAbort.signal);
        failures = 0;
        if (job === undefined) {
          this.m.polls.inc({ result: 'empty' });
          continue;
        }
        this.m.polls.inc({ result: 'job' });
        this.launch(job);
      } catch (err) {
        if (this.stopping) break;
        this.m.polls.inc({ result: 'error' });
        const wait = backoff(failures++, 1000, 30_000);
        this.o.log.warn({ err: String(err), retryInMs: wait }, 'poll failed');
        await sleep(wait, this.pollAbort.signal);
      }
    }
  }

  private launch(job: Job): void {
    const abort = new AbortController();
    const entry: Running = { job, abort, cancelled: false, timedOut: false, reported: false, done: SETTLED };
    this.running.set(job.pipeline_id, entry);
    this.m.running.set(this.running.size);
    entry.done = pipelineSpan(job, () => this.runJob(entry))
      .catch((err: unknown) => this.o.log.error({ err, pipeline: job.pipeline_id }, 'pipeline run failed'))
      .finally(() => {
        this.running.delete(job.pipeline_id);
        this.m.running.set(this.running.size);
        this.slotFreed?.();
        this.slotFreed = undefined;
      });
  }

  private report<T>(fn: () => Promise<T>): Promise<T> {
    return withRetry(fn, {
      signal: this.hardStop.signal,
      onRetry: (e) => this.o.log.warn({ err: String(e) }, 'report failed; retrying'),
    });
  }

  private async runJob(r: Running): Promise<void> {
    const { job } = r;
    const log = this.o.log.child({ pipeline: job.pipeline_id, repo: `${job.org}/${job.repo}` });
    log.info({ commit: job.commit_node }, 'pipeline started');
    const steps = job.steps.filter((s) => s.status !== 'skipped');
    let failed = false;
    let errorMessage: string | undefined;
    const limit = job.pipeline_timeout_seconds;
    const deadline =
      limit === undefined
        ? undefined
        : setTimeout(
            () => {
              if (r.cancelled || r.reported) return;
              r.timedOut = true;
              r.abort.abort();
            },
            Math.min(limit * 1000, 2 ** 31 - 1),
          );
    const refused = refusedSteps(steps, this.o.maxResources);
    try {
      try {
        // a step above the pool's maximum: nothing of the pipeline runs, not even the clone
        if (refused.size > 0) failed = true;
        else await this.o.executor.prepare(job, r.abort.signal).then(() => log.debug('workspace prepared'));
      } catch (err) {
        failed = true;
        errorMessage = err instanceof Error ? err.message : String(err);
        log.info({ err: errorMessage }, 'workspace not prepared');
      }
      for (const step of steps) {
        if (failed || r.cancelled || r.abort.signal.aborted) {
          const why = refused.get(step.id);
          await (
            why !== undefined
              ? reportRefused(this.api, step, why, (fn) => this.report(fn))
              : this.report(() =>
                  this.api.stepStatus(step.id, {
                    status: r.cancelled ? 'cancelled' : 'skipped',
                    finished_at: now(),
                  }),
                )
          ).catch(() => undefined);
          continue;
        }
        const ok = await stepSpan(step, () => this.runStep(r, step, log));
        if (!ok) failed = true;
      }
      if (r.timedOut && !r.cancelled) {
        failed = true;
        errorMessage ??= `the pipeline ran past its time limit of ${formatDuration(limit ?? 0)}: stopped`;
      }
      const status = r.cancelled
        ? 'cancelled'
        : r.timedOut
          ? 'failure'
          : failed
            ? errorMessage !== undefined
              ? 'error'
              : 'failure'
            : 'success';
      await this.report(() =>
        this.api.pipelineStatus(job.pipeline_id, {
          status,
          finished_at: now(),
          ...(errorMessage !== undefined ? { error_message: errorMessage } : {}),
          ...(status === 'cancelled' && this.stopping
            ? { error_message: `agent ${this.o.instance} shut down` }
            : {}),
        }),
      );
      r.reported = true;
      log.info({ status }, 'pipeline finished');
    } finally {
      clearTimeout(deadline);
      await this.o.executor.cleanup(job).catch((err: unknown) => log.warn({ err }, 'cleanup failed'));
    }
  }

  /** Runs one step; false when it failed. */
  private async runStep(r: Running, step: JobStep, log: Logger): Promise<boolean> {
    const startedAt = now();
    const started = Date.now();
    await this.report(() => this.api.stepStatus(step.id, { status: 'running', started_at: startedAt }));
    const shipper = new LogShipper((offset, chunk) => this.api.appendLog(step.id, offset, chunk), {
      signal: this.hardStop.signal,
      onShipped: (n) => this.m.logBytes.inc(n),
      onError: (e) => {
        if (!retryable(e)) log.warn({ err: String(e), step: step.number }, 'log chunk refused');
      },
    });
    const out = new LogLimiter((d) => shipper.write(d), r.job.log_max_bytes);
    // The step's own signal: the pipeline's, or its timeout.
    const stepAbort = new AbortController();
    const stopStep = () => stepAbort.abort();
    r.abort.signal.addEventListener('abort', stopStep, { once: true });
    if (r.abort.signal.aborted) stepAbort.abort();
    let timedOut = false;
    const timeout = step.timeout_seconds;
    const timer =
      timeout === undefined
        ? undefined
        : setTimeout(
            () => {
              timedOut = true;
              stepAbort.abort();
            },
            Math.min(timeout * 1000, 2 ** 31 - 1),
          );
    let exitCode: number;
    let stoppedWhy = false;
    try {
      const result = await this.o.executor.runStep({
        job: r.job,
        step,
        env: { ...step.environment, ...r.job.ci_env },
        onOutput: (d) => out.write(d),
        signal: stepAbort.signal,
      });
      exitCode = result.exitCode;
      if (r.timedOut && !r.cancelled) {
        const limit = formatDuration(r.job.pipeline_timeout_seconds ?? 0);
        out.write(Buffer.from(`\n[triad] the pipeline ran past its time limit of ${limit}: stopped\n`));
      } else if (timedOut && !r.cancelled) {
        out.write(Buffer.from(`\n[triad] step timed out after ${timeout} s: stopped\n`));
      } else if (result.reason !== undefined) out.write(Buffer.from(`\n[triad] ${result.reason}\n`));
      // a reason means the executor ended the step, whatever its exit code
      stoppedWhy = result.reason !== undefined;
    } catch (err) {
      exitCode = 1;
      out.write(
        Buffer.from(`\n[triad] step could not run: ${err instanceof Error ? err.message : String(err)}\n`),
      );
    } finally {
      clearTimeout(timer);
      r.abort.signal.removeEventListener('abort', stopStep);
    }
    out.finish();
    await shipper.close();
    const stopped = timedOut || r.timedOut || stoppedWhy;
    const status = r.cancelled ? 'cancelled' : exitCode === 0 && !stopped ? 'success' : 'failure';
    this.m.steps.observe({ status }, (Date.now() - started) / 1000);
    const pipelineStatus = await this.report(() =>
      this.api.stepStatus(step.id, {
        status,
        exit_code: exitCode,
        started_at: startedAt,
        finished_at: now(),
        ...(out.truncated ? { log_truncated: true } : {}),
      }),
    );
    if (pipelineStatus !== 'running' && !r.cancelled) {
      r.cancelled = true;
      r.abort.abort();
    }
    return status === 'success';
  }

  /**
   * Stops polling, lets running pipelines finish for the drain period, then cancels what is
   * left (reporting it) and resolves. When the server cannot be reached, reports are retried
   * for `stopGraceMs` at most: then every call is aborted, so stopping never hangs on it.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.pollAbort.abort();
    this.slotFreed?.();
    const all = () => Promise.all([...this.running.values()].map((r) => r.done));
    const within = (ms: number) =>
      Promise.race([all().then(() => true), sleep(ms, this.hardStop.signal).then(() => false)]);
    if (!(await within(this.o.drainMs))) {
      this.o.log.warn(
        { pipelines: [...this.running.keys()] },
        'drain period over: cancelling running pipelines',
      );
      for (const r of this.running.values()) {
        r.cancelled = true;
        r.abort.abort();
      }
      if (!(await within(this.o.stopGraceMs))) {
        this.o.log.warn(
          { pipelines: [...this.running.keys()] },
          'the server does not take the reports: giving up on them',
        );
        this.hardStop.abort();
        await all();
      }
    }
    await this.loopDone;
    for (const t of this.timers) clearTimeout(t);
    await this.m.close();
  }
}
