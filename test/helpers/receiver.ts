import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request as a webhook receiver saw it, with both signatures checked the way a receiver would. */
export type Received = {
  at: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: any;
  event: string | undefined;
  delivery: string | undefined;
  attempt: number;
  /** `X-Svc-Signature-256` checked (undefined: no header sent). */
  svcValid: boolean | undefined;
  /** Standard Webhooks signature checked with the `standardwebhooks` library (undefined: no header). */
  standardValid: boolean | undefined;
};

export type Answer = {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Answer after this long. */
  delayMs?: number;
  /** Never answer (the request stays open until the client gives up or the receiver closes). */
  hold?: boolean;
};

/** `X-Svc-Signature-256` the way the spec tells receivers: HMAC-SHA256 of the raw body, constant-time compare. */
export function verifySvc(secret: string, raw: Buffer, header: string | undefined): boolean {
  if (header === undefined || !header.startsWith('sha256=')) return false;
  const expected = createHmac('sha256', secret).update(raw).digest();
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Standard Webhooks verification through its library, with the secret given as `whsec_` + base64. */
export function verifyStandard(secret: string, raw: Buffer, headers: http.IncomingHttpHeaders): boolean {
  try {
    const wh = new Webhook(`whsec_${Buffer.from(secret, 'utf8').toString('base64')}`);
    wh.verify(raw, headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

/** A webhook receiver on loopback; `answer` decides each response (default 200). */
export class Receiver {
  readonly requests: Received[] = [];
  answer: (r: Received, index: number) => Answer = () => ({});
  secret: string | undefined;
  private readonly server: http.Server;
  private readonly waiters = new Set<() => void>();
  private readonly open = new Set<http.ServerResponse>();

  private constructor(server: http.Server, secret: string | undefined) {
    this.server = server;
    this.secret = secret;
  }

  static async start(secret?: string, host = '127.0.0.1'): Promise<Receiver> {
    const server = http.createServer();
    const r = new Receiver(server, secret);
    server.on('request', (req, res) => r.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return r;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const h = req.headers;
      const one = (k: string) => (typeof h[k] === 'string' ? h[k] : undefined);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const s = this.secret;
      const got: Received = {
        at: Date.now(),
        path: req.url ?? '',
        headers: h,
        raw,
        body,
        event: one('x-svc-event'),
        delivery: one('x-svc-delivery'),
        attempt: Number(one('x-svc-delivery-attempt') ?? NaN),
        svcValid:
          one('x-svc-signature-256') === undefined || s === undefined
            ? undefined
            : verifySvc(s, raw, one('x-svc-signature-256')),
        standardValid:
          one('webhook-signature') === undefined || s === undefined ? undefined : verifyStandard(s, raw, h),
      };
      const index = this.requests.length;
      this.requests.push(got);
      for (const w of [...this.waiters]) w();
      const a = this.answer(got, index);
      if (a.hold === true) {
        this.open.add(res);
        return;
      }
      const send = () => {
        res.writeHead(a.status ?? 200, { 'content-type': 'text/plain', ...(a.headers ?? {}) });
        res.end(a.body ?? 'ok');
      };
      if (a.delayMs !== undefined) setTimeout(send, a.delayMs);
      else send();
    });
  }

  /** Waits until `n` requests (matching `filter`) arrived; returns them. */
  async waitFor(
    n: number,
    filter: (r: Received) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<Received[]> {
    const started = Date.now();
    for (;;) {
      const hits = this.requests.filter(filter);
      if (hits.length >= n) return hits;
      const left = timeoutMs - (Date.now() - started);
      if (left <= 0) {
        throw new Error(
          `receiver: ${hits.length}/${n} requests after ${timeoutMs} ms; got ${JSON.stringify(
            this.requests.map((r) => [r.event, r.delivery, r.attempt]),
          )}`,
        );
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.waiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 250));
        this.waiters.add(done);
      });
    }
  }

  /** Nothing more arrives within `ms` (asserts quiet periods). */
  async quiet(ms: number): Promise<number> {
    const before = this.requests.length;
    await new Promise((r) => setTimeout(r, ms));
    return this.requests.length - before;
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
