import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { hostedDir, newRepo, withSpoolServer } from '../helpers/factories.ts';
import { tempDir, vcsEnv, writeFile } from '../helpers/vcs.ts';
import { WorkingCopy } from '../helpers/clients.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import {
  basic,
  filesUnder,
  killProcessesWithEnv,
  noFilesUnder,
  waitNoProcesses,
} from '../helpers/transport.ts';
import { waitFor } from '../helpers/wait.ts';
import { sample } from '../helpers/metrics.ts';

// One backend run at a time, one request waiting, one hgweb worker: the smallest bounded pool.
let s: TestServer;
let owner: TestUser;
let org: string;
let spool: string;
withSpoolServer(
  {
    TRIAD_TRANSPORT_CONCURRENCY: '1',
    TRIAD_TRANSPORT_QUEUE: '1',
    TRIAD_TRANSPORT_RETRY_AFTER_SECONDS: '7',
    TRIAD_HG_WORKERS: '1',
  },
  (w) => ({ s, owner, org, spool } = w),
);
afterEach(async () => {
  await killProcessesWithEnv(`SCRIPT_NAME=/${org}/`);
});

async function newHgRepo() {
  const repo = await newRepo(owner, org, { vcs: 'hg' });
  return { ...repo, dir: hostedDir(s.dataDir, repo) };
}

const workers = () => s.running.services.transports.workerPids();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function capabilities(repo: { name: string }): Promise<Response> {
  return fetch(`${s.url}/${org}/${repo.name}?cmd=capabilities`, { signal: AbortSignal.timeout(30_000) });
}

describe('the pooled hgweb workers', () => {
  test('when several hg clones and pushes follow each other, then one long-lived worker serves them all', async () => {
    const repo = await newHgRepo();
    const w = await WorkingCopy.clone('hg', repo.clone, owner.token);
    const [first] = workers();
    expect(first).toBeDefined();
    for (const n of [1, 2, 3]) {
      await w.commit(`f${n}.txt`, `${n}\n`, `change ${n}`);
      expect((await w.push()).code).toBe(0);
    }
    const again = await WorkingCopy.clone('hg', repo.clone, owner.token);
    expect(await again.head()).toBe(await w.head());
    expect(workers()).toEqual([first]);
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push', 'push', 'push']);
  }, 120_000);

  test('when the worker is killed, then the next clone starts a fresh one and succeeds', async () => {
    const repo = await newHgRepo();
    const w = await WorkingCopy.clone('hg', repo.clone, owner.token);
    await w.commit('a.txt', 'a\n', 'first');
    expect((await w.push()).code).toBe(0);
    const before = workers();
    expect(before).toHaveLength(1);
    for (const pid of before) process.kill(pid, 'SIGKILL');
    await waitFor('the worker to be gone', () => Promise.resolve(before.some(alive) ? undefined : true));

    const again = await WorkingCopy.clone('hg', repo.clone, owner.token);
    expect(await again.head()).toBe(await w.head());
    const after = workers();
    expect(after).toHaveLength(1);
    expect(after).not.toEqual(before);
  }, 120_000);
});

describe('the transports concurrency cap', () => {
  test('when every slot is taken and the queue is full, then a clone (and a push to another repository, once it holds its push lock) gets 503 with Retry-After, the API still answers, and an aborted push frees its slot (the waiting clone runs), worker and hook', async () => {
    const repo = await newHgRepo();
    const w = await WorkingCopy.clone('hg', repo.clone, owner.token);
    await w.commit('a.txt', 'a\n', 'held');
    const flag = path.join(await tempDir(), 'in-hook');
    await writeFile(repo.dir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = touch ${flag} && sleep 60\n`);
    const [cmd, args] = w.pushCommand();
    const client = spawn(cmd, args, { cwd: w.dir, env: vcsEnv, stdio: 'ignore', detached: true });
    const gone = new Promise((resolve) => client.once('exit', resolve));
    await waitFor('the hook to run', () =>
      fs
        .access(flag)
        .then(() => true)
        .catch(() => undefined),
    );
    const serving = workers();
    expect(serving).toHaveLength(1);

    // one request waits for the slot, the next is refused
    const limiter = s.running.services.transports.limiter;
    const waiting = capabilities(repo);
    await waitFor('a request in the queue', () =>
      Promise.resolve(limiter.load().waiting === 1 ? true : undefined),
    );
    const refused = await capabilities(repo);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('7');
    expect(await refused.text()).toMatch(/too many clone and push requests/);
    // a push to another repository gets its push lock, then the same 503 for the full queue
    const other = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: uniq('git'), vcs: 'git' });
    expect(other.status).toBe(201);
    const pushRefused = await fetch(`${s.url}/${org}/${other.body.data.name}/git-receive-pack`, {
      method: 'POST',
      headers: {
        authorization: basic(owner.token),
        'content-type': 'application/x-git-receive-pack-request',
      },
      body: '0000',
      signal: AbortSignal.timeout(30_000),
    });
    expect(pushRefused.status).toBe(503);
    expect(pushRefused.headers.get('retry-after')).toBe('7');
    expect(await pushRefused.text()).toMatch(/too many clone and push requests/);
    expect(await outboxEvents(s, other.body.data.id)).toEqual([]);
    // /metrics shows the slot taken, the request waiting and the two refusals
    const m = (await s.anon.get('/metrics')).text;
    expect(sample(m, 'triad_transport_running_requests')).toBe(1);
    expect(sample(m, 'triad_transport_queued_requests')).toBe(1);
    expect(sample(m, 'triad_transport_refusals_total', { reason: 'queue_full' })).toBe(2);
    expect(sample(m, 'triad_vcs_transfers_total', { kind: 'hg', result: 'busy' })).toBe(1);
    expect(sample(m, 'triad_vcs_transfers_total', { kind: 'git', result: 'busy' })).toBe(1);
    // the API is not behind the cap
    const api = await owner.client.get(`/api/v1/repos/${org}/${repo.name}`);
    expect(api.status).toBe(200);

    process.kill(-client.pid!, 'SIGKILL');
    await gone;
    // the worker that ran the push and the hook it started end; the slot is free again
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);
    await waitFor('the worker to end', () => Promise.resolve(serving.some(alive) ? undefined : true));
    await fs.rm(path.join(repo.dir, '.hg', 'hgrc'));
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(await served.text()).toMatch(/unbundle/);
    // the aborted push's spooled body, held answer and TMPDIR are gone
    expect(await noFilesUnder(spool)).toEqual([]);
    // the interrupted transaction is rolled back by the next push, which goes through
    await w.commit('b.txt', 'b\n', 'next');
    expect((await w.push()).code).toBe(0);
    expect(await fs.readdir(path.join(repo.dir, '.hg', 'store'))).not.toContain('journal');
    const events = await outboxEvents(s, repo.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.payload.commits.map((c: { subject: string }) => c.subject)).toEqual(['next', 'held']);
  }, 120_000);

  test('when pushes queue behind a push held on one repository, then they hold no slot: a clone of another repository gets one at once, never a 503', async () => {
    const spoolDir = await tempDir('triad-spool-test-');
    const t = await startTestServer({
      TRIAD_TRANSPORT_CONCURRENCY: '2',
      TRIAD_TRANSPORT_QUEUE: '1',
      TRIAD_HG_WORKERS: '2',
      TRIAD_TRANSPORT_SPOOL_DIR: spoolDir,
    });
    const u = await t.newUser();
    const o = await t.newOrg(u);
    const clients: ReturnType<typeof spawn>[] = [];
    try {
      const a = await u.client.post(`/api/v1/orgs/${o}/repos`, { name: 'busy', vcs: 'hg' });
      const b = await u.client.post(`/api/v1/orgs/${o}/repos`, { name: 'other', vcs: 'git' });
      expect([a.status, b.status]).toEqual([201, 201]);
      const src = await WorkingCopy.clone('git', b.body.data.clone_url, u.token);
      await src.commit('b.txt', 'b\n', 'other repository');
      expect((await src.push()).code).toBe(0);
      const copies = [];
      for (const n of [0, 1, 2]) {
        const c = await WorkingCopy.clone('hg', a.body.data.clone_url, u.token);
        await c.commit(`f${n}.txt`, `${n}\n`, `push ${n}`);
        copies.push(c);
      }
      const aDir = path.join(t.dataDir, 'repos', `${a.body.data.id}.hg`);
      const flag = path.join(await tempDir(), 'in-hook');
      await writeFile(aDir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = touch ${flag} && sleep 60\n`);
      const push = (c: WorkingCopy) => {
        const [cmd, args] = c.pushCommand();
        const p = spawn(cmd, args, { cwd: c.dir, env: vcsEnv, stdio: 'ignore', detached: true });
        clients.push(p);
      };
      push(copies[0]!);
      await waitFor('the hook to run', () =>
        fs
          .access(flag)
          .then(() => true)
          .catch(() => undefined),
      );
      // two more pushes to the same repository: their bodies are spooled, they wait for its lock.
      // One after the other: a read gives its slot back once its worker reported the end, which
      // on a loaded machine can come after its client had the whole answer (Content-Length) and
      // sent its next request; two clients reading at once could then fill the one free slot
      // and the one place in the queue, and a third read would be refused (503).
      const bodies = async () => (await filesUnder(spoolDir)).filter((f) => path.basename(f) === 'body');
      for (const [n, c] of [copies[1]!, copies[2]!].entries()) {
        push(c);
        await waitFor(`${n + 2} spooled push bodies`, async () =>
          (await bodies()).length === n + 2 ? true : undefined,
        );
      }
      // the held push alone holds a slot (the last read's slot comes back with its worker's end)
      const limiter = t.running.services.transports.limiter;
      const only = (l: { active: number; waiting: number }) => l.active === 1 && l.waiting === 0;
      await waitFor('the held push alone to hold a slot', () => (only(limiter.load()) ? true : undefined));

      // the other repository is served with the free slot (no 503 for a full queue either)
      const clone = await WorkingCopy.clone('git', b.body.data.clone_url, u.token);
      expect(await clone.head()).toBe(await src.head());
      const refs = await fetch(`${t.url}/${o}/other/info/refs?service=git-upload-pack`, {
        headers: { authorization: basic(u.token) },
        signal: AbortSignal.timeout(30_000),
      });
      expect(refs.status).toBe(200);
      await refs.arrayBuffer();
      expect(limiter.load()).toEqual({ active: 1, waiting: 0 });
      expect((await bodies()).length).toBe(3);
    } finally {
      for (const c of clients) if (c.exitCode === null) process.kill(-c.pid!, 'SIGKILL');
      await killProcessesWithEnv(`SCRIPT_NAME=/${o}/`);
      await t.close();
    }
    expect(await noFilesUnder(spoolDir)).toEqual([]);
  }, 180_000);

  test('when more clones arrive than run at once, then they wait their turn and all succeed', async () => {
    const roomy = await startTestServer({ TRIAD_TRANSPORT_CONCURRENCY: '2', TRIAD_HG_WORKERS: '2' });
    try {
      const u = await roomy.newUser();
      const o = await roomy.newOrg(u);
      const r = await u.client.post(`/api/v1/orgs/${o}/repos`, { name: 'many', vcs: 'hg' });
      expect(r.status).toBe(201);
      const src = await WorkingCopy.clone('hg', r.body.data.clone_url, u.token);
      await src.commit('b.txt', 'b\n', 'many clones');
      expect((await src.push()).code).toBe(0);
      const clones = await Promise.all(
        Array.from({ length: 6 }, () => WorkingCopy.clone('hg', r.body.data.clone_url, u.token)),
      );
      const head = await src.head();
      for (const c of clones) expect(await c.head()).toBe(head);
      expect(roomy.running.services.transports.workerPids().length).toBeLessThanOrEqual(2);
    } finally {
      await roomy.close();
    }
  }, 120_000);
});
