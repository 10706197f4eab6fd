import { afterAll, beforeAll, expect } from '@jest/globals';
import { uniq, type TestServer, type TestUser } from './server.ts';
import { ok, tempDir, withCreds, writeFile } from './vcs.ts';
import { Receiver } from './receiver.ts';
import { newRepo, serverWithOrg } from './factories.ts';

/**
 * The setting of the webhook delivery tests: a server with fast retries and small limits, an org
 * owner, loopback receivers (closed after the file), git repositories to push to, and readers of
 * the delivery history. Call at the top of a test file; it registers its own beforeAll/afterAll.
 */
export const DELIVERY_ENV = {
  TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
  TRIAD_WEBHOOK_RETRY_SCHEDULE: '300ms,300ms',
  // Every attempt the tests expect to succeed must be answered within this, by a receiver in the
  // jest process; 1 s was short of the stalls a loaded 2-CPU machine shows (a timed-out first
  // attempt makes `attempt: 1` and counted-delivery assertions fail).
  TRIAD_WEBHOOK_TIMEOUT: '3s',
  TRIAD_WEBHOOK_DISABLE_AFTER: '4',
  TRIAD_WEBHOOK_HISTORY_MAX: '6',
  // Two attempts per webhook in flight at most (a quarter of the concurrency).
  TRIAD_WEBHOOK_CONCURRENCY: '8',
};

export function webhookWorld(env: Record<string, string> = DELIVERY_ENV) {
  let s: TestServer;
  let owner: TestUser;
  let org: string;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    ({ s, owner, org } = await serverWithOrg(env));
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
    const { name, clone, id, api } = await newRepo(owner, org, { vcs: 'git' });
    return { name, clone, id, hooks: `${api}/webhooks` };
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

  return {
    /** The server, the org owner and the org (after beforeAll). */
    get: () => ({ s, owner, org }),
    receiver,
    gitRepo,
    hook,
    push,
    deliveries,
    until,
  };
}
