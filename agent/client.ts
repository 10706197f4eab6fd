import type { Job } from './types.ts';
import { injectTraceHeaders } from '../src/telemetry/spans.ts';

export class HttpError extends Error {
  readonly status: number;
  readonly body: string;
  readonly headers: Headers;
  constructor(status: number, body: string, headers: Headers, what: string) {
    super(`${what}: HTTP ${status} ${body.slice(0, 300)}`);
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

/** Network failures and 5xx/429 are worth retrying; other 4xx are answers. */
export function retryable(e: unknown): boolean {
  if (e instanceof HttpError) return e.status >= 500 || e.status === 429;
  return !(e instanceof DOMException && e.name === 'AbortError');
}

export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/** Full-jitter exponential back-off: attempt 0 -> up to `base`, doubling to at most `max`. */
export function backoff(attempt: number, base = 500, max = 30_000): number {
  const cap = Math.min(max, base * 2 ** Math.min(attempt, 16));
  return Math.floor(cap / 2 + (Math.random() * cap) / 2);
}

export type StepStatusReport = {
  status: string;
  exit_code?: number | null;
  started_at?: string | null;
  finished_at?: string | null;
  /** The agent cut the middle of the log to keep it under the step log limit. */
  log_truncated?: boolean;
};

/**
 * The agent's side of the CI protocol (`/api/v1/ci/*`), with an agent token. Every call names the
 * instance and this process's nonce (`X-Svc-Agent-Nonce`), so the server tells a restarted
 * process from the one that claimed a pipeline. Aborting `stopped` ends every call at once.
 */
export class ServerClient {
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly stopped: AbortSignal | undefined;
  /** The `labels` query of polls (`k=v,...`; empty: unlabelled pipelines only). */
  private readonly labels: string;

  constructor(
    server: string,
    token: string,
    instance: string,
    nonce: string,
    stopped?: AbortSignal,
    labels = '',
  ) {
    this.base = server.replace(/\/+$/, '');
    this.labels = labels === '' ? '' : `&labels=${encodeURIComponent(labels)}`;
    this.headers = {
      authorization: `Bearer ${token}`,
      'x-svc-agent-instance': instance,
      'x-svc-agent-nonce': nonce,
    };
    this.stopped = stopped;
  }

  private async call(
    method: string,
    path: string,
    what: string,
    body?: string | Buffer,
    extra: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Response> {
    const r = await fetch(`${this.base}${path}`, {
      method,
      // within a pipeline's span, the call continues its trace (`traceparent`)
      headers: injectTraceHeaders({ ...this.headers, ...extra }),
      body,
      signal: AbortSignal.any([
        signal ?? AbortSignal.timeout(60_000),
        ...(this.stopped === undefined ? [] : [this.stopped]),
      ]),
    });
    if (r.status >= 400) throw new HttpError(r.status, await r.text(), r.headers, what);
    return r;
  }

  private json(
    method: string,
    path: string,
    what: string,
    payload: unknown,
    signal?: AbortSignal,
  ): Promise<Response> {
    return this.call(
      method,
      path,
      what,
      JSON.stringify(payload),
      { 'content-type': 'application/json' },
      signal,
    );
  }

  /** A job, or undefined after `waitSeconds` with nothing to do. */
  async poll(waitSeconds: number, signal: AbortSignal): Promise<Job | undefined> {
    const r = await this.call(
      'POST',
      `/api/v1/ci/poll?wait=${waitSeconds}${this.labels}`,
      'poll',
      undefined,
      {},
      // a long poll the server never answers (a half-open connection) ends too
      AbortSignal.any([signal, AbortSignal.timeout(waitSeconds * 1000 + 30_000)]),
    );
    if (r.status === 204) return undefined;
    return (await r.json()) as Job;
  }

  /**
   * Reports the pipelines this process runs; answers those of them the server has finished (stop
   * them). A heartbeat slower than `timeoutMs` is abandoned: the next one asks again, so one stuck
   * request does not hold back cancellations.
   */
  async heartbeat(running: number[], timeoutMs = 60_000): Promise<number[]> {
    const r = await this.json(
      'POST',
      '/api/v1/ci/heartbeat',
      'heartbeat',
      { running },
      AbortSignal.timeout(timeoutMs),
    );
    const body = (await r.json()) as { cancelled_pipelines?: number[] };
    return body.cancelled_pipelines ?? [];
  }

  async stepStatus(stepId: number, report: StepStatusReport): Promise<string> {
    const r = await this.json('PUT', `/api/v1/ci/steps/${stepId}/status`, 'step status', report);
    return ((await r.json()) as { pipeline_status: string }).pipeline_status;
  }

  async pipelineStatus(
    pipelineId: number,
    report: { status: string; finished_at?: string; error_message?: string },
  ): Promise<void> {
    await this.json('PUT', `/api/v1/ci/pipelines/${pipelineId}/status`, 'pipeline status', report);
  }

  /** Appends a log chunk at `offset`; answers the size the server now has. */
  async appendLog(stepId: number, offset: number, chunk: Buffer): Promise<number> {
    const r = await this.call(
      'POST',
      `/api/v1/ci/steps/${stepId}/log?offset=${offset}`,
      'log append',
      chunk,
      {
        'content-type': 'text/plain; charset=utf-8',
      },
    );
    return ((await r.json()) as { data: { size: number } }).data.size;
  }
}

/** Retries `fn` on retryable errors with jittered back-off until it succeeds or `deadlineMs` passes. */
export async function withRetry<T>(
  fn: () => Promise<T>,
  opts: { deadlineMs?: number; signal?: AbortSignal; onRetry?: (e: unknown) => void } = {},
): Promise<T> {
  const until = Date.now() + (opts.deadlineMs ?? 15 * 60_000);
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!retryable(e) || Date.now() >= until || opts.signal?.aborted === true) throw e;
      opts.onRetry?.(e);
      await sleep(Math.min(backoff(attempt, 250, 5000), Math.max(0, until - Date.now())), opts.signal);
    }
  }
}
