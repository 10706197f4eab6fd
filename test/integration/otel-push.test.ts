import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createLogger } from '../../src/telemetry/logger.ts';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, type NewRepo } from '../helpers/factories.ts';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp.ts';
import { Receiver } from '../helpers/receiver.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

let rx: OtlpReceiver;
let hooks: Receiver;
let s: TestServer;
let owner: TestUser;
let repo: NewRepo;
/** The server's log lines, parsed. */
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  rx = await OtlpReceiver.start();
  hooks = await Receiver.start();
  const log = createLogger('debug', {
    format: 'json',
    output: {
      write: (text: string) => {
        for (const l of text.split('\n'))
          if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      },
    },
  });
  s = await startTestServer(
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.endpoint,
      OTEL_SERVICE_NAME: 'triad-test',
      TRIAD_LOG_REQUESTS: 'true',
      TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
    },
    { log },
  );
  owner = await s.newUser();
  const org = await s.newOrg(owner);
  repo = await newRepo(owner, org, { vcs: 'git' });
  const h = await owner.client.post(`${repo.api}/webhooks`, { url: hooks.url(), events: ['push'] });
  expect(h.status).toBe(201);
});

afterAll(async () => {
  await hooks.close();
  await rx.close();
});

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** The span's ancestors in its trace, nearest first. */
function ancestors(span: ReceivedSpan, all: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(all.map((x) => [x.spanId, x]));
  const out: ReceivedSpan[] = [];
  for (let p = byId.get(span.parentSpanId ?? ''); p !== undefined; p = byId.get(p.parentSpanId ?? ''))
    out.push(p);
  return out;
}

test('when a client pushes with a traceparent, then one trace holds the request, lock wait, backend, SQL and outbox spans, and its log lines carry the trace id', async () => {
  const traceId = hex(16);
  const clientSpan = hex(8);
  const work = await tempDir();
  await ok('git', ['init', '-q', '-b', 'main', work], work);
  await writeFile(work, 'README.md', '# traced\n');
  await ok('git', ['add', '.'], work);
  await ok('git', ['commit', '-q', '-m', 'traced push'], work);
  const header = `http.extraHeader=traceparent: 00-${traceId}-${clientSpan}-01`;
  await ok('git', ['-c', header, 'push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
  // the push's webhook goes out (its own trace, from the dispatcher) with a traceparent
  const [delivered] = await hooks.waitFor(1);
  await s.close(); // flushes the exporter

  expect(rx.refused).toEqual([]);
  const spans = rx.trace(traceId);
  expect(spans.every((x) => x.service === 'triad-test')).toBe(true);
  // every request of the push continues the client's trace (traceparent extracted)
  const requests = spans.filter((x) => x.kind === 2);
  expect(requests.map((x) => x.name)).toContain('POST /:org/:repo/*rest');
  expect(requests.every((x) => x.parentSpanId === clientSpan)).toBe(true);
  const post = requests.find((x) => x.name === 'POST /:org/:repo/*rest')!;
  expect(post.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.route': '/:org/:repo/*rest',
    'http.response.status_code': 200,
  });
  const under = (x: ReceivedSpan) => ancestors(x, spans).includes(post);
  const named = (name: string) => spans.filter((x) => x.name === name && under(x));
  // the push lock: the in-process queue and the database lock
  expect(named('repo.change')).toHaveLength(1);
  expect(named('push.lock.queue')).toHaveLength(1);
  expect(named('push.lock')).toHaveLength(1);
  // the backend process
  const [backend] = named('git backend git-receive-pack');
  expect(backend?.attributes).toMatchObject({ 'vcs.kind': 'git', 'vcs.push': true, 'process.exit.code': 0 });
  // the commands around it (snapshots of the refs before and after)
  expect(spans.some((x) => x.attributes['vcs.kind'] === 'git' && x !== backend && under(x))).toBe(true);
  // SQL: the lock, the outbox rows, the commit
  const sql = spans.filter((x) => x.attributes['db.system.name'] === 'postgresql' && under(x));
  expect(sql.map((x) => x.name)).toEqual(
    expect.arrayContaining(['SELECT', 'INSERT outbox_events', 'COMMIT']),
  );
  expect(sql.find((x) => x.name === 'INSERT outbox_events')?.attributes['db.query.text']).toContain('?');
  // the request's own lookups (prepared statements, sent to the pool directly): the token first
  const lookups = sql.filter((x) => x.parentSpanId === post.spanId);
  expect(lookups[0]?.attributes).toMatchObject({ 'db.query.prepared': 'triad_token_grant' });
  const [outbox] = named('outbox.write');
  expect(outbox?.attributes).toMatchObject({ 'outbox.events': 1, 'outbox.event_types': ['push'] });
  expect(sql.some((x) => x.parentSpanId === outbox?.spanId && x.name === 'INSERT outbox_events')).toBe(true);

  // the log lines of the push's requests carry its trace id, and those of other requests do not
  const clonePath = new URL(repo.clone).pathname;
  const atClone = (l: Record<string, unknown>) => String(l.url).startsWith(clonePath);
  const pushLines = lines.filter((l) => l.msg === 'request' && atClone(l));
  expect(pushLines.length).toBeGreaterThanOrEqual(2);
  expect(pushLines.map((l) => l.trace_id)).toEqual(pushLines.map(() => traceId));
  expect(pushLines.some((l) => l.span_id === post.spanId)).toBe(true);
  const others = lines.filter((l) => l.msg === 'request' && !atClone(l));
  expect(others.length).toBeGreaterThan(0);
  expect(others.some((l) => l.trace_id === traceId)).toBe(false);

  // the webhook request carries the traceparent of its delivery's client span
  const tp = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(delivered!.headers.traceparent));
  expect(tp).not.toBeNull();
  const delivery = rx.trace(tp![1]!);
  const send = delivery.find((x) => x.spanId === tp![2]);
  expect(send).toMatchObject({ name: 'POST', kind: 3 });
  expect(send?.attributes['http.response.status_code']).toBe(200);
  expect(ancestors(send!, delivery).map((x) => x.name)).toContain('webhook.deliver');
});
