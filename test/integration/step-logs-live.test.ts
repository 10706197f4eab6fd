/**
 * Step logs for signed-in browsers: the whole log with byte ranges, and the live log as
 * Server-Sent Events woken by the pipeline's change notifications, resumable by Last-Event-ID.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { TWO_STEPS, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { startTestServer, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { webSessionCookie } from '../helpers/web-session.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
let agent: Client;
let cookie: string;

beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  org = await s.newOrg(owner);
  agent = await newAgent(s);
  cookie = await webSessionCookie(s, owner);
}, 60_000);
afterAll(async () => {
  await s?.close();
});

type Sse = { event: string; id?: string; data: string };

/** An open live log: its events as they arrive. */
class Live {
  readonly events: Sse[] = [];
  closed = false;
  private waiters: (() => void)[] = [];
  readonly response: Response;
  private readonly abort: AbortController;
  private constructor(response: Response, abort: AbortController) {
    this.response = response;
    this.abort = abort;
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<Live> {
    const abort = new AbortController();
    const r = await fetch(url, { headers: { cookie, ...headers }, signal: abort.signal });
    const live = new Live(r, abort);
    if (r.ok) void live.read();
    return live;
  }

  private async read(): Promise<void> {
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const piece of this.response.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(piece, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const e: Sse = { event: 'message', data: '' };
          let comment = true;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            comment = false;
            const [k, v = ''] = [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)];
            if (k === 'event') e.event = v;
            else if (k === 'id') e.id = v;
            else if (k === 'data') e.data += v;
          }
          if (!comment) this.events.push(e);
          this.wake();
        }
      }
    } catch {
      // aborted
    }
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits (at most `ms`) until `ok` holds of the events so far. */
  async until(ok: (events: Sse[]) => boolean, ms = 20_000): Promise<void> {
    const end = Date.now() + ms;
    while (!ok(this.events)) {
      if (this.closed || Date.now() > end) throw new Error(`not seen: ${JSON.stringify(this.events)}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 100);
      });
    }
  }

  text(): string {
    return this.events
      .filter((e) => e.event === 'log')
      .map((e) => JSON.parse(e.data) as string)
      .join('');
  }

  close(): void {
    this.abort.abort();
  }
}

const web = (r: GitRepo, rest: string) => `${s.url}/${org}/${r.name}/-/pipelines/1/steps/${rest}`;
const append = async (stepId: number, text: string | Buffer) =>
  expect(
    (await agent.post(`/api/v1/ci/steps/${stepId}/log`, text, { 'content-type': 'text/plain' })).status,
  ).toBe(200);

async function runningStep(): Promise<{ repo: GitRepo; stepId: number; pipelineId: number }> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
  await repo.push();
  const job = (await agent.post('/api/v1/ci/poll')).body;
  const stepId = job.steps[0].id as number;
  expect((await agent.put(`/api/v1/ci/steps/${stepId}/status`, { status: 'running' })).status).toBe(200);
  return { repo, stepId, pipelineId: job.pipeline_id as number };
}

async function finish(stepId: number, pipelineId: number): Promise<void> {
  expect(
    (await agent.put(`/api/v1/ci/steps/${stepId}/status`, { status: 'success', exit_code: 0 })).status,
  ).toBe(200);
  expect((await agent.put(`/api/v1/ci/pipelines/${pipelineId}/status`, { status: 'success' })).status).toBe(
    200,
  );
}

describe('live step logs', () => {
  test('a running step streams as it is written, woken at once, and ends with done', async () => {
    const { repo, stepId, pipelineId } = await runningStep();
    await append(stepId, 'one\ntwo\n');
    const live = await Live.open(web(repo, '1/live'));
    expect(live.response.status).toBe(200);
    expect(live.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await live.until((e) => e.some((x) => x.event === 'log'));
    expect(live.events[0]).toEqual({ event: 'begin', data: JSON.stringify({ offset: 0, size: 8 }) });
    expect(live.events[1]).toEqual({ event: 'log', id: '8', data: JSON.stringify('one\ntwo\n') });
    // woken by the append's notification (the fallback look is 15 s away)
    const t0 = Date.now();
    await append(stepId, 'three\r\n');
    await live.until((e) => e.filter((x) => x.event === 'log').length === 2, 12_000);
    expect(Date.now() - t0).toBeLessThan(12_000);
    // a character split between two appends is sent whole, once
    await append(stepId, Buffer.from([0xc3]));
    await append(stepId, Buffer.from([0xa9, 0x0a]));
    await live.until((e) => e.at(-1)?.id === '18');
    expect(live.text()).toBe('one\ntwo\nthree\r\né\n');
    expect(live.text()).not.toContain('\ufffd');
    await finish(stepId, pipelineId);
    await live.until((e) => e.some((x) => x.event === 'done'));
    expect(live.events.at(-1)).toEqual({
      event: 'done',
      data: JSON.stringify({ status: 'success', exit_code: 0, size: 18 }),
    });
    await live.until(() => live.closed);

    // resumed by Last-Event-ID: the bytes after it, once; a tail starts at a line
    const again = await Live.open(web(repo, '1/live'), { 'last-event-id': '8' });
    await again.until(() => again.closed);
    expect(again.text()).toBe('three\r\né\n');
    const tail = await Live.open(web(repo, 'build/live?tail=5'));
    await tail.until(() => tail.closed);
    expect(tail.events[0]).toEqual({ event: 'begin', data: JSON.stringify({ offset: 15, size: 18 }) });
    expect(tail.text()).toBe('é\n');
  });

  test('the raw log: whole or a byte range, for sessions only; bad requests are refused', async () => {
    const { repo, stepId, pipelineId } = await runningStep();
    await append(stepId, 'alpha\nbeta\n');
    await finish(stepId, pipelineId);
    const whole = await fetch(web(repo, '1/raw'), { headers: { cookie } });
    expect(whole.status).toBe(200);
    expect(whole.headers.get('accept-ranges')).toBe('bytes');
    expect(await whole.text()).toBe('alpha\nbeta\n');
    const part = await fetch(web(repo, '1/raw'), { headers: { cookie, range: 'bytes=6-9' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 6-9/11');
    expect(await part.text()).toBe('beta');
    const past = await fetch(web(repo, '1/raw'), { headers: { cookie, range: 'bytes=11-' } });
    expect(past.status).toBe(416);
    // anonymous readers of a public repository are sent to sign in (as the API's log read)
    const anon = await fetch(web(repo, '1/raw'), { redirect: 'manual' });
    expect(anon.status).toBe(303);
    expect(anon.headers.get('location')).toMatch(/^\/-\/login\?return_to=/);
    expect((await fetch(web(repo, '9/raw'), { headers: { cookie } })).status).toBe(404);
    expect((await fetch(web(repo, '1/live?offset=x'), { headers: { cookie } })).status).toBe(400);
  });

  test('a user holds at most 16 live logs at once', async () => {
    const { repo, stepId, pipelineId } = await runningStep();
    const streams = await Promise.all(Array.from({ length: 16 }, () => Live.open(web(repo, '1/live'))));
    expect(streams.map((x) => x.response.status)).toEqual(Array(16).fill(200));
    const over = await fetch(web(repo, '1/live'), { headers: { cookie } });
    expect(over.status).toBe(429);
    streams[0]!.close();
    // the slot is free once the server has seen that connection close (its own time under load)
    const one = await waitFor('a live log slot freed by the closed stream', async () => {
      const x = await Live.open(web(repo, '1/live'));
      if (x.response.status === 200) return x;
      expect(x.response.status).toBe(429);
      x.close();
      return undefined;
    });
    for (const x of [...streams, one]) x.close();
    await finish(stepId, pipelineId);
  });
});
