/**
 * An OTLP/HTTP trace receiver on loopback (what a collector is to the server): it accepts
 * `POST /v1/traces` with JSON bodies (the OTLP exporter's encoding here) and keeps every span.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ReceivedSpan = {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  service: string | undefined;
};

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
type KeyValue = { key: string; value: AnyValue & { arrayValue?: { values?: AnyValue[] } } };
type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: KeyValue[];
};
type OtlpBody = {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
};

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests that were not JSON trace bodies (content types seen). */
  readonly refused: string[] = [];
  private readonly server: http.Server;
  /** Keep nothing (a benchmark's sink). */
  discard = false;
  /** Export requests received. */
  exports = 0;

  private constructor(server: http.Server) {
    this.server = server;
  }

  static async start(): Promise<OtlpReceiver> {
    const server = http.createServer();
    const r = new OtlpReceiver(server);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        r.exports += 1;
        if (!r.discard) r.take(req.headers['content-type'] ?? '', Buffer.concat(chunks));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return r;
  }

  /** The endpoint to give OTEL_EXPORTER_OTLP_ENDPOINT. */
  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private take(contentType: string, body: Buffer): void {
    if (!contentType.includes('json')) {
      this.refused.push(contentType);
      return;
    }
    const parsed = JSON.parse(body.toString('utf8')) as OtlpBody;
    for (const rs of parsed.resourceSpans ?? []) {
      const service = attributes(rs.resource?.attributes)['service.name'];
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId === undefined || s.parentSpanId === '' ? undefined : s.parentSpanId,
            name: s.name,
            kind: s.kind,
            attributes: attributes(s.attributes),
            service: typeof service === 'string' ? service : undefined,
          });
    }
  }
}

function value(v: KeyValue['value']): unknown {
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map((x) => value(x));
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.boolValue ?? v.doubleValue;
}

function attributes(kvs: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, value(kv.value)]));
}
