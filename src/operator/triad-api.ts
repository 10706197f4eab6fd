import { formatLabels } from '../pipelines/labels.ts';
import { injectTraceHeaders } from '../telemetry/spans.ts';

/** What the operator asks the Triad server, with a site administrator's token (`/api/v1/admin/agents`, the queue). */
export type RegisteredAgent = {
  id: number;
  name: string;
  instances: { name: string; labels: Record<string, string>; live: boolean; running_pipelines: number[] }[];
  running_pipelines: number[];
};
export type QueueFigures = { pending: number; running: number; agents: number; version: string };

export class TriadApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export class TriadApi {
  private readonly base: string;
  private readonly token: string;

  constructor(server: string, token: string) {
    this.base = server.replace(/\/+$/, '');
    this.token = token;
  }

  get server(): string {
    return this.base;
  }

  private async call(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    let r: Response;
    try {
      r = await fetch(`${this.base}${path}`, {
        method,
        // within a reconcile's span, the call continues its trace (`traceparent`)
        headers: injectTraceHeaders({
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ?? AbortSignal.timeout(30_000),
      });
    } catch (err) {
      if (signal?.aborted === true) throw err;
      throw new TriadApiError(
        0,
        `Triad server ${this.base} unreachable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    if (r.status >= 400) {
      const text = await r.text();
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message;
      } catch {
        // not the error envelope
      }
      throw new TriadApiError(r.status, `${method} ${path}: ${r.status} ${message}`);
    }
    return r;
  }

  async agents(): Promise<RegisteredAgent[]> {
    const r = await this.call('GET', '/api/v1/admin/agents');
    return ((await r.json()) as { data: RegisteredAgent[] }).data;
  }

  async register(name: string): Promise<{ id: number; token: string }> {
    const r = await this.call('POST', '/api/v1/admin/agents', { name });
    return ((await r.json()) as { data: { id: number; token: string } }).data;
  }

  /** Deregisters an agent; one that is already gone is fine. */
  async deregister(id: number): Promise<void> {
    try {
      await this.call('DELETE', `/api/v1/admin/agents/${id}`);
    } catch (err) {
      if (!(err instanceof TriadApiError && err.status === 404)) throw err;
    }
  }

  /** The queue figures of a label set; with `since`, once they differ from that version (up to `waitSeconds`). */
  async queue(
    labels: Record<string, string>,
    since: string | undefined,
    waitSeconds: number,
    signal: AbortSignal,
  ): Promise<QueueFigures> {
    const q = new URLSearchParams({ labels: formatLabels(labels) });
    if (since !== undefined) {
      q.set('since', since);
      q.set('wait', String(waitSeconds));
    }
    const timeout = AbortSignal.timeout((waitSeconds + 30) * 1000);
    const r = await this.call(
      'GET',
      `/api/v1/ci/queue?${q.toString()}`,
      undefined,
      AbortSignal.any([signal, timeout]),
    );
    return (await r.json()) as QueueFigures;
  }
}
