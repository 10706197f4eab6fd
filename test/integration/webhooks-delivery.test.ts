import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { Receiver } from '../helpers/receiver.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
const receivers: Receiver[] = [];

beforeAll(async () => {
  s = await startTestServer({
    TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
    TRIAD_WEBHOOK_RETRY_SCHEDULE: '300ms,300ms',
    TRIAD_WEBHOOK_TIMEOUT: '1s',
    TRIAD_WEBHOOK_DISABLE_AFTER: '4',
    TRIAD_WEBHOOK_HISTORY_MAX: '6',
    // Two attempts per webhook in flight at most (a quarter of the concurrency).
    TRIAD_WEBHOOK_CONCURRENCY: '8',
  });
  owner = await s.newUser();
  org = await s.newOrg(owner);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await s.close();
});

async function receiver(secret?: string): Promise<Receiver> {
  const r = await Receiver.start(secret);
  receivers.push(r);
  return r;
}

async function gitRepo(): Promise<{ name: string; clone: string; id: number; hooks: string }> {
  const name = uniq('w');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'git' });
  expect(r.status).toBe(201);
  return {
    name,
    clone: r.body.data.clone_url,
    id: r.body.data.id,
    hooks: `/api/v1/repos/${org}/${name}/webhooks`,
  };
}

async function hook(base: string, body: Record<string, unknown>): Promise<number> {
  const r = await owner.client.post(base, body);
  expect(r.status).toBe(201);
  return r.body.data.id;
}

/** Commits a file and pushes `main` (and `tag`, when given). Returns the head commit id. */
async function push(
  clone: string,
  opts: { tag?: string; work?: string } = {},
): Promise<{ head: string; work: string }> {
  let work = opts.work;
  if (work === undefined) {
    work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
  }
  await writeFile(work, `f-${uniq('x')}.txt`, 'content\n');
  await ok('git', ['add', '.'], work);
  await ok('git', ['commit', '-q', '-m', 'a change'], work);
  const refs = ['main'];
  if (opts.tag !== undefined) {
    await ok('git', ['tag', opts.tag], work);
    refs.push(opts.tag);
  }
  await ok('git', ['push', '-q', withCreds(clone, owner.token), ...refs], work);
  return { head: (await ok('git', ['rev-parse', 'HEAD'], work)).trim(), work };
}

async function deliveries(base: string, id: number): Promise<any[]> {
  const r = await owner.client.get(`${base}/${id}/deliveries`);
  expect(r.status).toBe(200);
  return r.body.data;
}

/** Polls the deliveries list until `pred` holds. */
async function until(base: string, id: number, pred: (d: any[]) => boolean, ms = 15_000): Promise<any[]> {
  const end = Date.now() + ms;
  for (;;) {
    const d = await deliveries(base, id);
    if (pred(d)) return d;
    if (Date.now() > end) throw new Error(`deliveries never matched: ${JSON.stringify(d)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('acceptance', () => {
  test('when a webhook with a secret subscribes to push and issue.opened, then a push and a new issue arrive signed both ways, a 500 is retried with the same delivery id, and the history shows both attempts', async () => {
    const repo = await gitRepo();
    const rx = await receiver('s3cr3t-acceptance');
    const id = await hook(repo.hooks, {
      url: rx.url(),
      secret: 's3cr3t-acceptance',
      events: ['push', 'issue.opened'],
    });

    const { head } = await push(repo.clone);
    const [p] = await rx.waitFor(1, (r) => r.event === 'push');
    expect(p!.svcValid).toBe(true);
    expect(p!.standardValid).toBe(true);
    expect(p!.headers['user-agent']).toBe('Svc-Webhooks/1.0');
    expect(p!.headers['content-type']).toBe('application/json');
    expect(p!.headers['webhook-id']).toBe(p!.delivery);
    expect(p!.attempt).toBe(1);
    expect(p!.body).toEqual({
      event: 'push',
      delivery_id: p!.delivery,
      repository: {
        id: repo.id,
        name: repo.name,
        org,
        full_name: `${org}/${repo.name}`,
        url: `${s.url}/${org}/${repo.name}`,
        clone_url: `${s.url}/${org}/${repo.name}`,
        vcs: 'git',
        default_branch: 'main',
        is_private: false,
      },
      sender: {
        id: owner.id,
        username: owner.username,
        display_name: `${owner.username} Display`,
        avatar_url: '',
      },
      timestamp: expect.stringMatching(/Z$/),
      payload: expect.objectContaining({ ref: 'main', ref_type: 'branch', after: head, created: true }),
    });

    // The next delivery fails once with 500, then succeeds.
    rx.answer = (r) => (r.event === 'issue.opened' && r.attempt === 1 ? { status: 500, body: 'boom' } : {});
    const issue = await owner.client.post(`/api/v1/repos/${org}/${repo.name}/issues`, {
      title: 'Hello hooks',
    });
    expect(issue.status).toBe(201);
    const tries = await rx.waitFor(2, (r) => r.event === 'issue.opened');
    expect(tries.map((t) => t.attempt)).toEqual([1, 2]);
    expect(tries[1]!.delivery).toBe(tries[0]!.delivery);
    expect(tries[1]!.raw.equals(tries[0]!.raw)).toBe(true);
    expect(tries.every((t) => t.svcValid === true && t.standardValid === true)).toBe(true);
    expect(tries[0]!.body.payload).toMatchObject({ action: 'opened', issue: { title: 'Hello hooks' } });

    const list = await until(
      repo.hooks,
      id,
      (d) => d.filter((x) => x.event_type === 'issue.opened').length === 2,
    );
    const [second, first] = list.filter((x) => x.event_type === 'issue.opened');
    expect(first).toEqual({
      id: expect.any(Number),
      event_type: 'issue.opened',
      response_code: 500,
      duration_ms: expect.any(Number),
      success: false,
      delivered_at: expect.stringMatching(/Z$/),
      delivery_id: tries[0]!.delivery,
      attempt: 1,
      event_id: expect.any(Number),
      redelivery: false,
      error: 'HTTP 500',
    });
    expect(second).toMatchObject({
      response_code: 200,
      success: true,
      attempt: 2,
      delivery_id: tries[0]!.delivery,
      error: null,
    });
    expect(second.event_id).toBe(first.event_id);
    const pushRecord = list.find((x) => x.event_type === 'push');
    expect(pushRecord).toMatchObject({ success: true, attempt: 1, delivery_id: p!.delivery });
  });
});

describe('event types', () => {
  test('when a webhook without a secret subscribes to every event that exists, then push, tag and each issue event arrive unsigned with their payloads', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    const events = ['push', 'tag', 'issue.opened', 'issue.closed', 'issue.reopened', 'issue.commented'];
    await hook(repo.hooks, { url: rx.url(), events });
    const { head } = await push(repo.clone, { tag: 'v1.0' });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    const created = await owner.client.post(issues, { title: 'Typed', assignees: [{ user_id: owner.id }] });
    expect(created.body.data.state).toBe('open');
    expect((await owner.client.patch(`${issues}/1`, { state: 'closed' })).status).toBe(200);
    expect((await owner.client.patch(`${issues}/1`, { state: 'open' })).status).toBe(200);
    expect((await owner.client.post(`${issues}/1/comments`, { body: 'a comment' })).status).toBe(201);

    const got = await rx.waitFor(6);
    expect(new Set(got.map((r) => r.event))).toEqual(new Set(events));
    for (const r of got) {
      expect(r.headers['x-svc-signature-256']).toBeUndefined();
      expect(r.headers['webhook-signature']).toBeUndefined();
      expect(r.headers['webhook-id']).toBe(r.delivery);
      expect(Number(r.headers['webhook-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(r.body.event).toBe(r.event);
      expect(r.body.delivery_id).toBe(r.delivery);
      // Push and tag too: who and where are in the envelope of every event.
      expect(r.body.repository).toMatchObject({ id: repo.id, full_name: `${org}/${repo.name}`, vcs: 'git' });
      expect(r.body.sender).toEqual({
        id: owner.id,
        username: owner.username,
        display_name: `${owner.username} Display`,
        avatar_url: '',
      });
    }
    const by = (e: string) => got.find((r) => r.event === e)!.body.payload;
    expect(by('push')).toMatchObject({ ref: 'main', after: head, total_commits: 1 });
    expect(by('tag')).toMatchObject({ ref: 'v1.0', ref_type: 'tag', target: head, commit: { id: head } });
    expect(by('issue.closed')).toMatchObject({ action: 'closed', issue: { number: 1, state: 'closed' } });
    expect(by('issue.reopened')).toMatchObject({ action: 'reopened', issue: { state: 'open' } });
    expect(by('issue.commented')).toMatchObject({ action: 'commented', comment: { body: 'a comment' } });
    expect(new Set(got.map((r) => r.delivery)).size).toBe(6);
  });

  test('when an organization webhook exists, then events of every repository of the organization reach it', async () => {
    const a = await gitRepo();
    const b = await gitRepo();
    const rx = await receiver('org-secret');
    const r = await owner.client.post(`/api/v1/orgs/${org}/webhooks`, {
      url: rx.url('/org'),
      secret: 'org-secret',
      events: ['push'],
    });
    expect(r.status).toBe(201);
    await push(a.clone);
    await push(b.clone);
    const got = await rx.waitFor(2);
    expect(got.map((x) => x.body.repository.name).sort()).toEqual([a.name, b.name].sort());
    expect(got.every((x) => x.svcValid === true && x.standardValid === true)).toBe(true);
    const list = await until(`/api/v1/orgs/${org}/webhooks`, r.body.data.id, (d) => d.length === 2);
    expect(list.every((d) => d.success)).toBe(true);

    // A ping of an organization webhook names no repository.
    const ping = await owner.client.post(`/api/v1/orgs/${org}/webhooks/${r.body.data.id}/ping`);
    expect(ping.status).toBe(202);
    const [p] = await rx.waitFor(1, (x) => x.event === 'ping');
    expect(p!.body).toMatchObject({ event: 'ping', repository: null, sender: { id: owner.id } });
  });
});

describe('retries', () => {
  test('when the receiver does not answer within the deadline, then the next attempt carries the same delivery id and attempt 2, and the history says timeout', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    rx.answer = (_r, i) => (i === 0 ? { delayMs: 2500 } : {});
    const id = await hook(repo.hooks, { url: rx.url(), events: ['push'] });
    await push(repo.clone);
    const [first, second] = await rx.waitFor(2);
    expect(second!.delivery).toBe(first!.delivery);
    expect([first!.attempt, second!.attempt]).toEqual([1, 2]);
    const list = await until(repo.hooks, id, (d) => d.some((x) => x.success));
    expect(list.map((x) => [x.attempt, x.success, x.response_code])).toEqual([
      [2, true, 200],
      [1, false, 0],
    ]);
    expect(list[1].error).toMatch(/^timeout/);
    expect(list[1].duration_ms).toBeGreaterThanOrEqual(900);
  });

  test('when the receiver answers 503 with Retry-After, then the next attempt waits that long instead of the schedule', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    rx.answer = (_r, i) => (i === 0 ? { status: 503, headers: { 'Retry-After': '2' } } : {});
    await hook(repo.hooks, { url: rx.url(), events: ['push'] });
    await push(repo.clone);
    const [first, second] = await rx.waitFor(2);
    expect(second!.delivery).toBe(first!.delivery);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1900);
  });

  test('when a delivery keeps failing, then newer events are delivered meanwhile (no head-of-line blocking) and retries stop after the schedule', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    rx.answer = (r) => (r.body?.payload?.issue?.title === 'stuck' ? { status: 500 } : {});
    const id = await hook(repo.hooks, { url: rx.url(), events: ['issue.opened'] });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    await owner.client.post(issues, { title: 'stuck' });
    await rx.waitFor(1);
    await owner.client.post(issues, { title: 'fresh' });
    const fresh = await rx.waitFor(1, (r) => r.body.payload.issue.title === 'fresh');
    const stuckBefore = rx.requests.filter((r) => r.body.payload.issue.title === 'stuck');
    expect(stuckBefore.length).toBeLessThan(3);
    expect(fresh[0]!.attempt).toBe(1);
    // Three attempts in all (schedule of two retries), then nothing more.
    const stuck = await rx.waitFor(3, (r) => r.body.payload.issue.title === 'stuck');
    expect(stuck.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(await rx.quiet(1000)).toBe(0);
    const h = await owner.client.get(`${repo.hooks}/${id}`);
    expect(h.body.data).toMatchObject({ is_active: true, disabled_reason: null });
  });
});

describe('fairness', () => {
  test('when one receiver is slow and has a backlog, then another webhook is not held up behind it', async () => {
    const repo = await gitRepo();
    const slow = await receiver();
    slow.answer = () => ({ delayMs: 700 });
    const fast = await receiver();
    await hook(repo.hooks, { url: slow.url(), events: ['issue.opened'] });
    await hook(repo.hooks, { url: fast.url(), events: ['issue.commented'] });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    for (let i = 0; i < 10; i++) await owner.client.post(issues, { title: `slow ${i}` });
    await slow.waitFor(1);
    await owner.client.post(`${issues}/1/comments`, { body: 'fast lane' });
    await fast.waitFor(1);
    // The slow webhook had at most its share of attempts under way (two) when the other arrived.
    expect(slow.requests.length).toBeLessThanOrEqual(4);
    await slow.waitFor(10);
  });
});

describe('disabling', () => {
  test('when the receiver answers 410 Gone, then the webhook is disabled at once with a reason and a history entry, and PATCH is_active true re-enables it', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    rx.answer = () => ({ status: 410 });
    const id = await hook(repo.hooks, { url: rx.url(), events: ['push'] });
    const { work } = await push(repo.clone);
    await rx.waitFor(1);
    const list = await until(repo.hooks, id, (d) => d.some((x) => x.event_type === 'webhook.disabled'));
    expect(list[0]).toMatchObject({ event_type: 'webhook.disabled', success: false, response_code: 0 });
    expect(list[0].error).toMatch(/410 Gone/);
    expect(list[1]).toMatchObject({ event_type: 'push', response_code: 410, attempt: 1 });
    const h = await owner.client.get(`${repo.hooks}/${id}`);
    expect(h.body.data).toMatchObject({
      is_active: false,
      disabled_reason: expect.stringMatching(/410 Gone/),
    });
    expect(h.body.data.last_delivery).toMatchObject({ id: list[1].id, success: false, response_code: 410 });

    // Disabled: a new push is not delivered, and the failed one is not retried.
    await push(repo.clone, { work });
    expect(await rx.quiet(1200)).toBe(0);

    rx.answer = () => ({});
    const on = await owner.client.patch(`${repo.hooks}/${id}`, { is_active: true });
    expect(on.status).toBe(200);
    expect(on.body.data).toMatchObject({ is_active: true, disabled_reason: null });
    await push(repo.clone, { work });
    const got = await rx.waitFor(2);
    expect(got[1]!.attempt).toBe(1);
  });

  test('when deliveries fail for good the configured number of times in a row, then the webhook disables itself with a webhook.disabled entry, stays quiet, and re-enabling resumes paused retries and new events', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    const title = (r: any) => r.body.payload.issue.title as string;
    rx.answer = () => ({ status: 500 });
    const id = await hook(repo.hooks, { url: rx.url(), events: ['issue.opened'] });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    // Three deliveries fail for good (three attempts each): nine failed attempts, three failed deliveries.
    for (const t of ['one', 'two', 'three']) await owner.client.post(issues, { title: t });
    await rx.waitFor(9);
    await until(repo.hooks, id, (d) => d.filter((x) => x.attempt === 3).length === 3);
    expect((await owner.client.get(`${repo.hooks}/${id}`)).body.data).toMatchObject({ is_active: true });

    // "five" waits a minute before its retry; "four" fails for good: the fourth failed delivery.
    rx.answer = (r) =>
      title(r) === 'five' ? { status: 503, headers: { 'Retry-After': '60' } } : { status: 500 };
    await owner.client.post(issues, { title: 'five' });
    await rx.waitFor(1, (r) => title(r) === 'five');
    await owner.client.post(issues, { title: 'four' });
    await rx.waitFor(3, (r) => title(r) === 'four');
    const list = await until(repo.hooks, id, (d) => d.some((x) => x.event_type === 'webhook.disabled'));
    expect(list[0]).toMatchObject({ event_type: 'webhook.disabled', attempt: 0, success: false });
    expect(list[0].error).toBe('4 consecutive failed deliveries (last: HTTP 500)');
    const h = await owner.client.get(`${repo.hooks}/${id}`);
    expect(h.body.data).toMatchObject({
      is_active: false,
      disabled_reason: '4 consecutive failed deliveries (last: HTTP 500)',
    });
    expect(rx.requests).toHaveLength(13);
    await owner.client.post(issues, { title: 'six' });
    expect(await rx.quiet(1200)).toBe(0);

    rx.answer = () => ({});
    const on = await owner.client.patch(`${repo.hooks}/${id}`, { is_active: true });
    expect(on.body.data).toMatchObject({ is_active: true, disabled_reason: null });
    // The paused retry of "five" is due at once (not after its minute), and new events flow.
    const [five] = await rx.waitFor(1, (r) => title(r) === 'five' && r.attempt === 2);
    expect(five!.at - Date.now()).toBeLessThan(30_000);
    await owner.client.post(issues, { title: 'seven' });
    await rx.waitFor(1, (r) => title(r) === 'seven');
    expect(rx.requests.some((r) => title(r) === 'six')).toBe(false);
  });
});

describe('redelivery and ping', () => {
  test('when a delivery is redelivered, then the same delivery id and body arrive with the next attempt number and the record says redelivery', async () => {
    const repo = await gitRepo();
    const rx = await receiver('redo');
    const id = await hook(repo.hooks, { url: rx.url(), secret: 'redo', events: ['push'] });
    await push(repo.clone);
    const [orig] = await rx.waitFor(1);
    const [rec] = await until(repo.hooks, id, (d) => d.length === 1);
    const r = await owner.client.post(`${repo.hooks}/${id}/deliveries/${rec.id}/redeliver`);
    expect(r.status).toBe(202);
    expect(r.body.data).toEqual({ delivery_id: orig!.delivery, event_id: rec.event_id, attempt: 2 });
    const [, again] = await rx.waitFor(2);
    expect(again!.delivery).toBe(orig!.delivery);
    expect(again!.attempt).toBe(2);
    expect(again!.raw.equals(orig!.raw)).toBe(true);
    expect(again!.svcValid).toBe(true);
    expect(again!.standardValid).toBe(true);
    const list = await until(repo.hooks, id, (d) => d.length === 2);
    expect(list[0]).toMatchObject({
      attempt: 2,
      redelivery: true,
      success: true,
      delivery_id: orig!.delivery,
    });

    expect((await owner.client.post(`${repo.hooks}/${id}/deliveries/999999999/redeliver`)).status).toBe(404);
  });

  test('when failed deliveries are redelivered in bulk since a time, then only deliveries whose latest attempt failed since then are queued', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    const id = await hook(repo.hooks, { url: rx.url(), events: ['issue.opened'] });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    const title = (r: any) => r.body.payload.issue.title as string;
    rx.answer = (r) => (['old', 'new'].includes(title(r)) ? { status: 500 } : {});
    await owner.client.post(issues, { title: 'old' });
    await rx.waitFor(3, (r) => title(r) === 'old');
    await owner.client.post(issues, { title: 'fine' });
    await rx.waitFor(1, (r) => title(r) === 'fine');
    await until(repo.hooks, id, (d) => d.some((x) => x.success));
    const since = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 20));
    await owner.client.post(issues, { title: 'new' });
    await rx.waitFor(3, (r) => title(r) === 'new');
    await until(repo.hooks, id, (d) => d.filter((x) => !x.success).length >= 3);
    await new Promise((r) => setTimeout(r, 300));

    rx.answer = () => ({});
    const bad = await owner.client.post(`${repo.hooks}/${id}/redeliver`, { since, status: 'succeeded' });
    expect(bad.status).toBe(400);
    const r = await owner.client.post(`${repo.hooks}/${id}/redeliver`, { since, status: 'failed' });
    expect(r.status).toBe(202);
    expect(r.body.data.queued).toBe(1);
    const [again] = await rx.waitFor(4, (x) => title(x) === 'new').then((g) => g.slice(3));
    expect(r.body.data.delivery_ids).toEqual([again!.delivery]);
    expect(again!.attempt).toBe(4);
    expect(await rx.quiet(800)).toBe(0);
  });

  test('when a webhook is pinged, then a ping envelope arrives and is recorded', async () => {
    const repo = await gitRepo();
    const rx = await receiver('pong');
    const id = await hook(repo.hooks, { url: rx.url(), secret: 'pong', events: ['push'] });
    const r = await owner.client.post(`${repo.hooks}/${id}/ping`);
    expect(r.status).toBe(202);
    const [p] = await rx.waitFor(1);
    expect(p!.event).toBe('ping');
    expect(p!.delivery).toBe(r.body.data.delivery_id);
    expect(p!.svcValid).toBe(true);
    expect(p!.body).toMatchObject({
      event: 'ping',
      repository: { id: repo.id, name: repo.name, org },
      sender: { id: owner.id },
      payload: { webhook: { id, url: rx.url(), events: ['push'], is_active: true } },
    });
    const list = await until(repo.hooks, id, (d) => d.length === 1);
    expect(list[0]).toMatchObject({ event_type: 'ping', event_id: null, success: true, attempt: 1 });
  });
});

describe('history', () => {
  test('when a delivery is read in detail, then it shows the request and the first 64 KiB of the response with secret-bearing headers masked', async () => {
    const repo = await gitRepo();
    const rx = await receiver('detail-secret');
    rx.answer = () => ({
      status: 202,
      headers: { 'Set-Cookie': 'session=abc', 'X-Receiver': 'seen' },
      body: 'x'.repeat(100 * 1024),
    });
    const id = await hook(repo.hooks, {
      url: rx.url('/detail?q=1'),
      secret: 'detail-secret',
      events: ['push'],
    });
    await push(repo.clone);
    const [got] = await rx.waitFor(1);
    const [rec] = await until(repo.hooks, id, (d) => d.length === 1);
    expect(rec).toMatchObject({ success: true, response_code: 202 });
    const d = await owner.client.get(`${repo.hooks}/${id}/deliveries/${rec.id}`);
    expect(d.status).toBe(200);
    expect(d.body.data).toMatchObject({ ...rec, request: { url: rx.url('/detail?q=1') } });
    expect(d.body.data.request.body).toBe(got!.raw.toString('utf8'));
    expect(d.body.data.request.headers).toMatchObject({
      'X-Svc-Event': 'push',
      'X-Svc-Delivery': got!.delivery,
      'X-Svc-Delivery-Attempt': '1',
      'X-Svc-Signature-256': '[masked]',
      'webhook-signature': '[masked]',
      'User-Agent': 'Svc-Webhooks/1.0',
    });
    expect(d.body.data.response.headers).toMatchObject({ 'set-cookie': '[masked]', 'x-receiver': 'seen' });
    expect(d.body.data.response.body).toBe('x'.repeat(64 * 1024));
    expect(JSON.stringify(d.body)).not.toContain('detail-secret');
    expect((await owner.client.get(`${repo.hooks}/${id}/deliveries/123456789`)).status).toBe(404);
    expect((await owner.client.get(`${repo.hooks}/${id}/deliveries/abc`)).status).toBe(404);
  });

  test('when more deliveries are made than the history keeps, then only the newest remain', async () => {
    const repo = await gitRepo();
    const rx = await receiver();
    const id = await hook(repo.hooks, { url: rx.url(), events: ['push'] });
    for (let i = 0; i < 8; i++) {
      expect((await owner.client.post(`${repo.hooks}/${id}/ping`)).status).toBe(202);
      await rx.waitFor(i + 1);
    }
    const list = await until(
      repo.hooks,
      id,
      (d) => d.length === 6 && d[0].delivery_id === rx.requests[7]!.delivery,
    );
    expect(list.map((x) => x.delivery_id)).toEqual(
      rx.requests
        .slice(2)
        .map((r) => r.delivery)
        .reverse(),
    );
    const oldest = list[5].id as number;
    expect((await owner.client.get(`${repo.hooks}/${id}/deliveries/${oldest - 1}`)).status).toBe(404);
  });
});
