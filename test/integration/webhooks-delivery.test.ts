import { beforeAll, describe, expect, test } from '@jest/globals';
import type { TestServer, TestUser } from '../helpers/server.ts';
import { webhookWorld } from '../helpers/webhook-world.ts';

// Delivery: the acceptance scenario, every event type, retries and fairness.
const w = webhookWorld();
const { receiver, gitRepo, hook, push, until } = w;
let s: TestServer;
let owner: TestUser;
let org: string;
beforeAll(() => {
  ({ s, owner, org } = w.get());
});

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
    rx.answer = (_r, i) => (i === 0 ? { delayMs: 5000 } : {}); // past the 3 s deadline
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
    expect(list[1].duration_ms).toBeGreaterThanOrEqual(2900);
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
    // The first failure asks for 3 s (Retry-After is honoured, see above), so the fresh event has
    // that long to be posted and delivered before the stuck one's retries; with the 300 ms schedule
    // alone a loaded machine could run all three stuck attempts first. Later failures are plain 500s.
    rx.answer = (r) =>
      r.body?.payload?.issue?.title !== 'stuck'
        ? {}
        : r.attempt === 1
          ? { status: 503, headers: { 'Retry-After': '3' } }
          : { status: 500 };
    const id = await hook(repo.hooks, { url: rx.url(), events: ['issue.opened'] });
    const issues = `/api/v1/repos/${org}/${repo.name}/issues`;
    await owner.client.post(issues, { title: 'stuck' });
    await rx.waitFor(1);
    await owner.client.post(issues, { title: 'fresh' });
    const fresh = await rx.waitFor(1, (r) => r.body.payload.issue.title === 'fresh');
    // Held behind the stuck delivery, the fresh one would come only after its last attempt.
    const stuckBefore = rx.requests.filter((r) => r.body.payload.issue.title === 'stuck');
    expect(stuckBefore.length).toBeLessThan(3);
    expect(fresh[0]!.attempt).toBe(1);
    // Three attempts in all (schedule of two retries, the first stretched by Retry-After), then nothing more.
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
    slow.answer = () => ({ delayMs: 2000 }); // long enough that a loaded machine still shows the share
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
    // the backlog drains, two 2 s answers at a time: ~10 s, so more than the usual limit
    await slow.waitFor(10, undefined, 40_000);
  }, 90_000);
});
