import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { addressRefusal, BlockedAddressError, guardedLookup, urlHost, type HostPolicy } from '../ssrf.ts';
import { inSpan, injectTraceHeaders, SpanKind, SpanStatusCode, tracingOn } from '../../telemetry/spans.ts';

/** Response bodies are read up to this many bytes, then the connection is dropped. */
export const RESPONSE_BODY_LIMIT = 64 * 1024;

export type Outcome = {
  /** The HTTP status, or 0 when no response arrived. */
  status: number;
  success: boolean;
  /** What went wrong, for the history (`timeout`, `connection refused`, `HTTP 500`, …), or null. */
  error: string | null;
  headers: Record<string, string | string[] | undefined>;
  /** The first 64 KiB of the response body, as text. */
  body: string;
  durationMs: number;
  /** A `Retry-After` the receiver sent, in milliseconds from now. */
  retryAfterMs: number | undefined;
};

/**
 * Sends webhook requests: POST only, no redirects followed, one total deadline for connect,
 * headers and body, response bodies read to at most 64 KiB. Targets are checked against the
 * host policy at connect time (IP literals before the request, names in the socket's lookup).
 */
export class Sender {
  private readonly policy: HostPolicy;
  private readonly timeoutMs: number;
  private readonly lookup: net.LookupFunction;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(opts: { policy: HostPolicy; timeoutMs: number; maxSockets?: number }) {
    this.policy = opts.policy;
    this.timeoutMs = opts.timeoutMs;
    this.lookup = guardedLookup(opts.policy);
    const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 64, maxFreeSockets: 16 };
    this.httpAgent = new http.Agent(agentOpts);
    this.httpsAgent = new https.Agent(agentOpts);
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /**
   * POSTs `body` to `target`. With tracing on, the request is a client span (`POST`, with the
   * target's host) and carries its `traceparent`, beside the `headers` given (which the history
   * records without it).
   */
  async send(target: string, headers: Record<string, string>, body: Buffer): Promise<Outcome> {
    if (!tracingOn()) return this.post(target, headers, body);
    let host = '';
    try {
      host = new URL(target).host;
    } catch {
      // an invalid URL is the attempt's outcome (post)
    }
    const attributes = { 'http.request.method': 'POST', 'server.address': host };
    return inSpan('POST', { kind: SpanKind.CLIENT, attributes }, async (span) => {
      const outcome = await this.post(target, injectTraceHeaders({ ...headers }), body);
      span.setAttribute('http.response.status_code', outcome.status);
      if (!outcome.success) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error ?? '' });
      return outcome;
    });
  }

  private async post(target: string, headers: Record<string, string>, body: Buffer): Promise<Outcome> {
    const started = performance.now();
    const took = () => Math.max(0, Math.round(performance.now() - started));
    const failed = (error: string, status = 0, extra: Partial<Outcome> = {}): Outcome => ({
      status,
      success: false,
      error,
      headers: {},
      body: '',
      durationMs: took(),
      retryAfterMs: undefined,
      ...extra,
    });
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return failed('invalid URL');
    }
    const host = urlHost(url);
    if (net.isIP(host) !== 0) {
      const why = addressRefusal(this.policy, host);
      if (why !== undefined) return failed(`blocked address: ${why}`);
    }
    const secure = url.protocol === 'https:';
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const finish = (o: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(o);
      };
      const req = (secure ? https : http).request(url, {
        method: 'POST',
        headers,
        agent: secure ? this.httpsAgent : this.httpAgent,
        lookup: this.lookup,
      });
      const deadline = setTimeout(() => {
        req.destroy();
        finish(failed(`timeout: no complete response within ${this.timeoutMs / 1000} s`));
      }, this.timeoutMs);
      req.on('error', (err) => finish(failed(describe(err))));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          const text = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8');
          const ok = status >= 200 && status < 300;
          finish({
            status,
            success: ok,
            error: ok ? null : statusError(status),
            headers: res.headers,
            body: text.replaceAll('\u0000', '\uFFFD'),
            durationMs: took(),
            retryAfterMs: retryAfter(res.headers['retry-after']),
          });
        };
        res.on('data', (chunk: Buffer) => {
          if (size >= RESPONSE_BODY_LIMIT) return;
          chunks.push(chunk);
          size += chunk.length;
          if (size >= RESPONSE_BODY_LIMIT) {
            // Enough: the rest is not read (the connection is dropped, not reused).
            done();
            res.destroy();
          }
        });
        res.on('end', done);
        res.on('error', () => finish(failed('connection lost while reading the response', status)));
        res.on('aborted', () => finish(failed('connection lost while reading the response', status)));
      });
      req.end(body);
    });
  }
}

function statusError(status: number): string {
  if (status >= 300 && status < 400) return `HTTP ${status} (redirects are not followed)`;
  return `HTTP ${status}`;
}

function describe(err: Error & { code?: string }): string {
  if (err instanceof BlockedAddressError) return err.message;
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'connection reset';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case undefined:
    default:
      return err.code?.startsWith('ERR_TLS') === true || err.code?.includes('CERT') === true
        ? `TLS: ${err.message}`
        : err.message || String(err.code ?? 'request failed');
  }
}

/** `Retry-After` as milliseconds from now: delta seconds or an HTTP date; undefined when absent or bad. */
export function retryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
