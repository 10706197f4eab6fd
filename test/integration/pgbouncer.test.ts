import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { TWO_STEPS, commitFiles, gitRepo, newAgent } from '../helpers/ci.ts';
import { Receiver } from '../helpers/receiver.ts';
import { startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { CLI, NODE, childEnv } from '../helpers/process.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';

/**
 * The server behind a real PgBouncer in transaction mode (Debian's package), with one server
 * connection per database: DATABASE_URL goes through PgBouncer, DATABASE_DIRECT_URL reaches
 * PostgreSQL for LISTEN/NOTIFY, the migration lock and the push locks. The database starts empty,
 * so the migrations run through PgBouncer too.
 */
let bouncer: PgBouncer;
let s: TestServer;
let owner: TestUser;
let org: string;
let direct: pg.Client;
let dbName: string;
let rx: Receiver;

beforeAll(async () => {
  const base = process.env.TRIAD_TEST_PG ?? '';
  dbName = `t_pgb_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  // a bound on idle transactions, which a push that held a transaction through its backend run
  // would run into (the held push below waits longer than this)
  await admin.query(`alter database ${dbName} set idle_in_transaction_session_timeout = '3s'`);
  await admin.end();
  bouncer = await startPgBouncer(`${base}/postgres`, { poolMode: 'transaction', poolSize: 1 });
  s = await startTestServer({
    DATABASE_URL: bouncer.url(dbName),
    DATABASE_DIRECT_URL: `${base}/${dbName}`,
    DATABASE_POOL_MODE: 'transaction',
    TRIAD_DB_POOL_MAX: '10',
    TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
  });
  owner = await s.newUser();
  org = await s.newOrg(owner);
  direct = new pg.Client({ connectionString: `${base}/${dbName}` });
  await direct.connect();
  rx = await Receiver.start();
}, 60_000);

afterAll(async () => {
  try {
    await rx?.close();
    await direct?.end();
    await s?.close();
  } finally {
    await bouncer?.stop();
  }
});

describe('PostgreSQL behind PgBouncer in transaction mode', () => {
  test('when a pipeline file is pushed, then a waiting agent is woken with the job, the pipeline runs to success and the push webhook is delivered, all through PgBouncer', async () => {
    const agent = await newAgent(s);
    const repo = await gitRepo(s, owner, org);
    const hook = await owner.client.post(`/api/v1/repos/${org}/${repo.name}/webhooks`, {
      url: rx.url(),
      events: ['push'],
    });
    expect(hook.status).toBe(201);
    // the agent is already waiting when the push lands: the queue's NOTIFY wakes it (LISTEN on
    // the direct connection)
    const polling = agent.post('/api/v1/ci/poll?wait=25');
    const sha = await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'add ci');
    await repo.push();
    const job = await polling;
    expect(job.status).toBe(200);
    expect(job.body).toMatchObject({ commit_node: sha, branch: 'main', repo: repo.name });
    for (const st of job.body.steps as { id: number }[]) {
      expect((await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status: 'running' })).status).toBe(200);
      const log = await agent.post(`/api/v1/ci/steps/${st.id}/log?offset=0`, 'ok\n', {
        'content-type': 'text/plain',
      });
      expect(log.status).toBe(200);
      const done = await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status: 'success', exit_code: 0 });
      expect(done.status).toBe(200);
    }
    const fin = await agent.put(`/api/v1/ci/pipelines/${job.body.pipeline_id}/status`, { status: 'success' });
    expect(fin.status).toBe(200);
    const p = await s.anon.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
    expect(p.body).toMatchObject({ status: 'success', commit_node: sha });
    const [delivered] = await rx.waitFor(1, (r) => r.event === 'push');
    expect(delivered!.body).toMatchObject({ event: 'push', payload: { ref: 'main', after: sha } });
    // the server's pool really went through PgBouncer (it logs each client login)
    expect(bouncer.log()).toContain(`login attempt: db=${dbName}`);
  }, 60_000);

  test('when a push is held in its backend past idle_in_transaction_session_timeout, then its push lock is held by a session outside any transaction, the API and a push to another repository go on through the one pooled server connection, and the push is recorded', async () => {
    const held = await gitRepo(s, owner, org);
    const first = await commitFiles(held, { 'a.txt': 'a\n' }, 'first');
    await held.push();
    const hosted = path.join(s.dataDir, 'repos', `${held.id}.git`);
    const flags = await fs.mkdtemp(path.join(s.dataDir, 'held-'));
    const hookFile = path.join(hosted, 'hooks', 'reference-transaction');
    await fs.mkdir(path.dirname(hookFile), { recursive: true });
    // holds the push's ref update (under the push lock) until told
    await fs.writeFile(
      hookFile,
      `#!/bin/sh\ncat >/dev/null\n[ "$1" = prepared ] || exit 0\n: > '${flags}/entered'\n` +
        `while [ ! -f '${flags}/go' ]; do sleep 0.05; done\n`,
      { mode: 0o755 },
    );
    const second = await commitFiles(held, { 'b.txt': 'b\n' }, 'second');
    const pushing = held.push();
    try {
      await waitUntil('the push to reach its ref update', () =>
        fs.access(path.join(flags, 'entered')).then(
          () => true,
          () => false,
        ),
      );
      const lock = await direct.query<{ state: string; xact_start: Date | null }>(
        `select a.state, a.xact_start from pg_locks l join pg_stat_activity a on a.pid = l.pid
          where l.locktype = 'advisory' and l.classid = $1 and l.objid = $2 and l.granted`,
        [0x70757368, held.id],
      );
      expect(lock.rows).toEqual([{ state: 'idle', xact_start: null }]);
      // longer than idle_in_transaction_session_timeout: the lock session is not in a transaction
      await sleep(3500);
      const still = await direct.query<{ state: string }>(
        `select a.state from pg_locks l join pg_stat_activity a on a.pid = l.pid
          where l.locktype = 'advisory' and l.classid = $1 and l.objid = $2 and l.granted`,
        [0x70757368, held.id],
      );
      expect(still.rows).toEqual([{ state: 'idle' }]);
      // with a transaction open for the push, PgBouncer's only server connection would be taken
      expect((await owner.client.get(`/api/v1/repos/${org}/${held.name}`)).status).toBe(200);
      const other = await gitRepo(s, owner, org);
      const otherHead = await commitFiles(other, { 'c.txt': 'c\n' }, 'other');
      await other.push();
      const otherBranches = await s.anon.get(`/api/v1/repos/${org}/${other.name}/branches`);
      expect(otherBranches.body.data).toEqual([
        expect.objectContaining({ name: 'main', commit: expect.objectContaining({ id: otherHead }) }),
      ]);
    } finally {
      // the push goes on (also when an expectation failed, so the server can stop)
      await fs.writeFile(path.join(flags, 'go'), '');
    }
    await pushing;
    await fs.rm(hookFile);
    // the held push was recorded (its event), after the wait
    const events = await direct.query<{ after: string }>(
      `select payload->>'after' as after from outbox_events where repo_id = $1 and event_type = 'push' order by id`,
      [held.id],
    );
    expect(events.rows.map((r) => r.after)).toEqual([first, second]);
    const branches = await s.anon.get(`/api/v1/repos/${org}/${held.name}/branches`);
    expect(branches.body.data).toEqual([
      expect.objectContaining({ name: 'main', commit: expect.objectContaining({ id: second }) }),
    ]);
    // released once the change is recorded
    await waitUntil('the push lock to be released', async () => {
      const l = await direct.query(
        `select 1 from pg_locks where locktype = 'advisory' and classid = $1 and objid = $2`,
        [0x70757368, held.id],
      );
      return l.rows.length === 0;
    });
  }, 60_000);

  test('when DATABASE_POOL_MODE=transaction is set without DATABASE_DIRECT_URL, then `triad serve` and `triad migrate` refuse to start, naming the variable', async () => {
    const env = childEnv({ DATABASE_URL: bouncer.url(dbName), DATABASE_POOL_MODE: 'transaction' });
    for (const cmd of ['serve', 'migrate']) {
      const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const c = execFile(NODE, [CLI, cmd], { env, timeout: 30_000 }, (_err, _out, stderr) =>
          resolve({ code: c.exitCode, stderr }),
        );
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('DATABASE_DIRECT_URL is required with DATABASE_POOL_MODE=transaction');
    }
  }, 60_000);
});
