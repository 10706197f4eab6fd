import { beforeAll, describe, expect, test } from '@jest/globals';
import type { TestUser } from '../helpers/server.ts';
import { webhookWorld } from '../helpers/webhook-world.ts';

// Webhooks disabling themselves, redelivery, ping and the delivery history.
const w = webhookWorld();
const { receiver, gitRepo, hook, push, until } = w;
let owner: TestUser;
let org: string;
beforeAll(() => {
  ({ owner, org } = w.get());
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
    const [fresh] = await rx.waitFor(3, (r) => title(r) === 'new');
    // its last failure is recorded (and its retries are over: recorded with the job's end)
    await until(repo.hooks, id, (d) =>
      d.some((x) => x.delivery_id === fresh!.delivery && x.attempt === 3 && !x.success),
    );

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
      // the attempt is on record before the next ping (successes are written in batches)
      await until(repo.hooks, id, (d) => d[0]?.delivery_id === rx.requests[i]!.delivery);
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
