import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { hostedDir, newRepo, withSpoolServer, type NewRepo } from '../helpers/factories.ts';
import { tempDir, vcsEnv, writeFile } from '../helpers/vcs.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { WorkingCopy } from '../helpers/clients.ts';
import {
  basic,
  killProcessesWithEnv,
  noFilesUnder,
  rawRequest,
  waitNoProcesses,
} from '../helpers/transport.ts';
import { waitFor, waitUntil } from '../helpers/wait.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { ormPool } from '../../src/telemetry/db-pool-metrics.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
let spool: string;
withSpoolServer({}, (w) => ({ s, owner, org, spool } = w));
afterEach(async () => {
  await killProcessesWithEnv(`SCRIPT_NAME=/${org}/`);
});

type Repo = NewRepo & { dir: string; kind: VcsKind };

async function repoOf(kind: VcsKind, server = s, inOrg = org, user = owner): Promise<Repo> {
  const repo = await newRepo(user, inOrg, { vcs: kind });
  return { ...repo, kind, dir: hostedDir(server.dataDir, repo) };
}

/** The request head of a push of each kind (the body never follows). */
function pushRequest(repo: Repo, token: string) {
  const auth = { authorization: basic(token), 'content-length': '100000' };
  const p = `/${org}/${repo.name}`;
  switch (repo.kind) {
    case 'git':
      return {
        method: 'POST',
        path: `${p}/git-receive-pack`,
        headers: { ...auth, 'content-type': 'application/x-git-receive-pack-request' },
      };
    case 'hg':
      return {
        method: 'POST',
        path: `${p}?cmd=unbundle`,
        headers: { ...auth, 'content-type': 'application/mercurial-0.1', 'x-hgarg-1': 'heads=666f726365' },
      };
    case 'fossil':
      return { method: 'POST', path: p, headers: { ...auth, 'content-type': 'application/x-fossil' } };
  }
}

/** Starts a push with the stock client and kills the client once `flag` exists (a hook runs). */
async function pushKilledWhen(w: WorkingCopy, flag: string): Promise<void> {
  const [cmd, args] = w.pushCommand();
  // its own process group: git push talks HTTP through a git-remote-http child
  const client = spawn(cmd, args, { cwd: w.dir, env: vcsEnv, stdio: 'ignore', detached: true });
  const gone = new Promise((resolve) => client.once('exit', resolve));
  await waitFor('the hook to run', () =>
    fs
      .access(flag)
      .then(() => true)
      .catch(() => undefined),
  );
  process.kill(-client.pid!, 'SIGKILL');
  await gone;
}

const backends = () => `SCRIPT_NAME=/${org}/`;

describe('clients that go away mid-transfer', () => {
  test('when 25 pushes (git, hg, fossil) stop after one body byte, then no process, spool file or lock is left and the service keeps answering', async () => {
    const repos = [await repoOf('git'), await repoOf('hg'), await repoOf('fossil')];
    await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        rawRequest(s.url, { ...pushRequest(repos[i % 3]!, owner.token), body: '0', abortAfterMs: 400 }),
      ),
    );
    expect(await waitNoProcesses(backends())).toEqual([]);
    expect(await noFilesUnder(spool)).toEqual([]);

    // the database routes answer (no pool connection is held by a stuck push)
    const api = await fetch(`${s.url}/api/v1/orgs/${org}`, { signal: AbortSignal.timeout(10_000) });
    expect(api.status).toBe(200);
    expect((await fetch(`${s.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(200);

    // and the next push of each kind goes through and is recorded
    for (const repo of repos) {
      const w = await WorkingCopy.clone(repo.kind, repo.clone, owner.token);
      await w.commit('after.txt', 'after the aborted pushes\n', 'after');
      const r = await w.push();
      expect({ kind: repo.kind, code: r.code, err: r.stderr }).toEqual({ kind: repo.kind, code: 0, err: '' });
      const events = await outboxEvents(s, repo.id);
      expect(events.map((e) => e.event_type)).toEqual(['push']);
      expect(events[0]!.payload.commits.map((c: { subject: string }) => c.subject)).toContain('after');
    }
    expect(await waitNoProcesses(backends())).toEqual([]);
    expect(await noFilesUnder(spool)).toEqual([]);
  }, 120_000);

  test('when an anonymous git or hg clone is dropped after the first bytes, then its backend processes end', async () => {
    const git = await repoOf('git');
    const hg = await repoOf('hg');
    for (const repo of [git, hg]) {
      const w = await WorkingCopy.clone(repo.kind, repo.clone, owner.token);
      await w.commit('big.bin', 6 * 1024 * 1024, 'big');
      expect((await w.push()).code).toBe(0);
      const head = await w.head();
      if (repo.kind === 'git') {
        const want = `want ${head} side-band-64k ofs-delta\n`;
        const pkt = (s: string) => `${(s.length + 4).toString(16).padStart(4, '0')}${s}`;
        await rawRequest(s.url, {
          method: 'POST',
          path: `/${org}/${repo.name}/git-upload-pack`,
          headers: { 'content-type': 'application/x-git-upload-pack-request' },
          body: `${pkt(want)}0000${pkt('done\n')}`,
          readBytes: 2000,
        });
      } else {
        await rawRequest(s.url, {
          method: 'GET',
          path: `/${org}/${repo.name}?cmd=getbundle`,
          headers: { 'x-hgarg-1': `common=${'0'.repeat(40)}&heads=${head}` },
          readBytes: 2000,
        });
      }
    }
    expect(await waitNoProcesses(backends())).toEqual([]);
  }, 120_000);

  test('when an hg push is dropped inside its transaction, then the hook and backend end, the transaction is rolled back and the next push works', async () => {
    const repo = await repoOf('hg');
    const w = await WorkingCopy.clone('hg', repo.clone, owner.token);
    await w.commit('a.txt', 'a\n', 'interrupted');
    const flag = path.join(await tempDir(), 'in-transaction');
    const hgrc = path.join(repo.dir, '.hg', 'hgrc');
    await writeFile(repo.dir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = touch ${flag} && sleep 600\n`);
    await pushKilledWhen(w, flag);
    expect(await waitNoProcesses(backends())).toEqual([]);
    await fs.rm(hgrc);

    await w.commit('b.txt', 'b\n', 'next');
    const r = await w.push();
    expect(r.code).toBe(0);
    const events = await outboxEvents(s, repo.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.payload.commits.map((c: { subject: string }) => c.subject)).toEqual([
      'next',
      'interrupted',
    ]);
    expect(await fs.readdir(path.join(repo.dir, '.hg', 'store'))).not.toContain('journal');
    expect(await noFilesUnder(spool)).toEqual([]);
  }, 120_000);

  test('when a git push is dropped while its pre-receive hook runs, then nothing is left behind and the next push works', async () => {
    const repo = await repoOf('git');
    const w = await WorkingCopy.clone('git', repo.clone, owner.token);
    await w.commit('a.txt', 'a\n', 'interrupted');
    const flag = path.join(await tempDir(), 'in-hook');
    await writeFile(repo.dir, 'hooks/pre-receive', `#!/bin/sh\ntouch ${flag}\nsleep 60\n`);
    await fs.chmod(path.join(repo.dir, 'hooks/pre-receive'), 0o755);
    await pushKilledWhen(w, flag);
    expect(await waitNoProcesses(backends())).toEqual([]);
    await fs.rm(path.join(repo.dir, 'hooks/pre-receive'));

    await w.commit('b.txt', 'b\n', 'next');
    expect((await w.push()).code).toBe(0);
    const [e, ...more] = await outboxEvents(s, repo.id);
    expect(more).toEqual([]);
    expect(e!.payload.commits.map((c: { subject: string }) => c.subject)).toEqual(['next', 'interrupted']);
    const objects = await fs.readdir(path.join(repo.dir, 'objects'));
    expect(objects.filter((n) => /^(tmp_objdir-)?incoming-/.test(n))).toEqual([]);
    expect(await noFilesUnder(spool)).toEqual([]);
  }, 120_000);
});

describe('limits', () => {
  let limited: TestServer;
  let user: TestUser;
  let lorg: string;
  let lspool: string;
  withSpoolServer(
    { TRIAD_TRANSPORT_TIMEOUT_SECONDS: '10', TRIAD_TRANSPORT_MAX_BODY_BYTES: '1mb' },
    (w) => ({ s: limited, owner: user, org: lorg, spool: lspool } = w),
  );
  afterEach(async () => {
    await killProcessesWithEnv(`SCRIPT_NAME=/${lorg}/`);
  });

  test('when a push runs past TRIAD_TRANSPORT_TIMEOUT_SECONDS, then it fails, its processes end, and the next push works', async () => {
    const repo = await repoOf('hg', limited, lorg, user);
    const w = await WorkingCopy.clone('hg', repo.clone, user.token);
    await w.commit('a.txt', 'a\n', 'slow');
    await writeFile(repo.dir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = sleep 60\n`);
    const r = await w.push();
    expect(r.code).not.toBe(0);
    expect(`${r.stdout}${r.stderr}`).toContain('504');
    expect(await waitNoProcesses(`SCRIPT_NAME=/${lorg}/`)).toEqual([]);
    await fs.rm(path.join(repo.dir, '.hg', 'hgrc'));
    const again = await w.push();
    expect({ code: again.code, out: again.stdout + again.stderr }).toEqual({ code: 0, out: '' });
    expect(await noFilesUnder(lspool)).toEqual([]);
  }, 120_000);

  test('when a push body is larger than TRIAD_TRANSPORT_MAX_BODY_BYTES, then it is refused with 413 and nothing is spooled', async () => {
    const repo = await repoOf('git', limited, lorg, user);
    const p = `/${lorg}/${repo.name}/git-receive-pack`;
    const headers = {
      authorization: basic(user.token),
      'content-type': 'application/x-git-receive-pack-request',
    };
    const declared = await rawRequest(limited.url, {
      method: 'POST',
      path: p,
      headers: { ...headers, 'content-length': String(2 * 1024 * 1024) },
    });
    expect(declared?.status).toBe(413);
    const chunk = Buffer.alloc(64 * 1024, 0x30);
    const chunks = Array.from(
      { length: 40 },
      () => `${chunk.length.toString(16)}\r\n${chunk.toString()}\r\n`,
    );
    const streamed = await rawRequest(limited.url, {
      method: 'POST',
      path: p,
      headers: { ...headers, 'transfer-encoding': 'chunked' },
      body: `${chunks.join('')}0\r\n\r\n`,
    });
    expect(streamed?.status).toBe(413);
    expect(await noFilesUnder(lspool)).toEqual([]);
    // a push within the limit goes through
    const w = await WorkingCopy.clone('git', repo.clone, user.token);
    await w.commit('small.txt', 'small\n', 'small');
    expect((await w.push()).code).toBe(0);
  }, 60_000);

  test('when an hg push is larger than TRIAD_TRANSPORT_MAX_BODY_BYTES, then hg shows the limit as the reason', async () => {
    const repo = await repoOf('hg', limited, lorg, user);
    const w = await WorkingCopy.clone('hg', repo.clone, user.token);
    await w.commit('big.bin', 1536 * 1024, 'too big'); // random bytes: incompressible, over 1 MiB
    const r = await w.push();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`abort: HTTP Error 413: request body larger than ${1024 * 1024} bytes\n`);
    expect(await outboxEvents(limited, repo.id)).toEqual([]);
  }, 60_000);
});

describe('graceful shutdown', () => {
  test('when the server shuts down during a stuck push, then closing its connection kills the backend and shutdown ends within its timeout', async () => {
    const server = await startTestServer({ TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '2' });
    const user = await server.newUser();
    const sorg = await server.newOrg(user);
    try {
      const repo = await repoOf('hg', server, sorg, user);
      const w = await WorkingCopy.clone('hg', repo.clone, user.token);
      await w.commit('a.txt', 'a\n', 'stuck');
      const flag = path.join(await tempDir(), 'stuck');
      await writeFile(repo.dir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = touch ${flag} && sleep 600\n`);
      const [cmd, args] = w.pushCommand();
      const client = spawn(cmd, args, { cwd: w.dir, env: vcsEnv, stdio: 'ignore' });
      const clientGone = new Promise((resolve) => client.once('exit', resolve));
      await waitFor('the hook to run', () =>
        fs
          .access(flag)
          .then(() => true)
          .catch(() => undefined),
      );
      // The hook sleeps far past the test's limit: only a close that does not wait for it ends in time.
      await server.close();
      expect(await waitNoProcesses(`SCRIPT_NAME=/${sorg}/`)).toEqual([]);
      await clientGone;
    } finally {
      await killProcessesWithEnv(`SCRIPT_NAME=/${sorg}/`);
    }
  }, 60_000);
});

describe('readiness', () => {
  test('when every database pool connection is taken, then /readyz answers 503 quickly, and 200 once they are released', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const pool = ormPool(s.running.orm);
    const max = (await pool()).options.max ?? 20;
    const holders = Array.from({ length: max + 10 }, () =>
      s.running.orm.em.fork().transactional(async (tx) => {
        await tx.execute('select 1');
        await held;
      }),
    );
    // Every connection of the pool is checked out (by holders or anything else) and holders wait.
    await waitUntil('every pool connection to be taken', async () => {
      const p = await pool();
      return p.totalCount === max && p.idleCount === 0 && p.waitingCount > 0;
    });
    // The connections are held until after the answer: a probe that waited for one would never answer.
    const r = await fetch(`${s.url}/readyz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ error: { code: 'service_unavailable', message: expect.any(String) } });
    release();
    await Promise.all(holders);
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
  }, 60_000);
});
