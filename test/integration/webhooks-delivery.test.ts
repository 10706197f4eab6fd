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
    TRIAD_WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms',
    TRIAD_WEBHOOK_TIMEOUT: '1s',
    TRIAD_WEBHOOK_DISABLE_AFTER: '4',
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
      repository: { id: repo.id, name: repo.name, org, url: `${s.url}/${org}/${repo.name}` },
      sender: { id: owner.id, display_name: `${owner.username} Display` },
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
