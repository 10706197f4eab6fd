/**
 * The retention policy (TRIAD_RETENTION_DAYS=7, TRIAD_RETENTION_KEEP=3) with the S3 blob store on
 * a real MinIO server: exactly the pipelines the policy names go, with their log objects, through
 * the web's deletion path; the newest finished pipeline of each branch, running and pending
 * pipelines, and every other repository's pipelines stay; a replica that does not get the lock
 * deletes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { TWO_STEPS, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestServer, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { ok } from '../helpers/vcs.ts';

const BUCKET = 'triad-retention';
let minio: MinioServer;
let s: TestServer;
let owner: TestUser;
let org: string;
let agent: Client;
let db: pg.Client;

beforeAll(async () => {
  minio = await startMinio();
  s = await startTestServer({
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: BUCKET,
    TRIAD_S3_REGION: minio.region,
    TRIAD_RETENTION_DAYS: '7',
    TRIAD_RETENTION_KEEP: '3',
    // the test runs the policy itself (its periodic run would race the set-up)
    TRIAD_RETENTION_INTERVAL: '1h',
  });
  owner = await s.newUser();
  org = await s.newOrg(owner);
  agent = await newAgent(s);
  db = new pg.Client({ connectionString: s.dbUrl });
  await db.connect();
}, 120_000);
afterAll(async () => {
  await db?.end();
  await s?.close();
  await minio?.stop();
});

const retention = () => s.running.services.pipelines.retention;
/** Pipeline ids by repository letter and number (`a1`: repository A's #1). */
const ids: Record<string, number> = {};
let repoC: GitRepo;

/** Pushes one commit with a two-step pipeline file to `branch`: a new pending pipeline. */
async function push(r: GitRepo, branch = 'main'): Promise<void> {
  if (branch !== 'main') await ok('git', ['checkout', '-q', '-B', branch], r.work);
  await commitFiles(r, { '.pipeline.yml': TWO_STEPS, 'n.txt': String(Math.random()) });
  await r.push(branch);
  if (branch !== 'main') {
    // back to main (made here when the branch was the repository's first)
    await ok('git', ['checkout', '-q', 'main'], r.work).catch(() =>
      ok('git', ['checkout', '-q', '-b', 'main'], r.work),
    );
  }
}

/** Claims the next pending pipeline; each step writes a line of log; ends it unless `running`. */
async function run(outcome: 'success' | 'failure' | 'running'): Promise<number> {
  const claim = await agent.post('/api/v1/ci/poll');
  expect(claim.status).toBe(200);
  const job = claim.body;
  for (const st of job.steps as { id: number; name: string }[]) {
    expect((await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status: 'running' })).status).toBe(200);
    const log = await agent.post(`/api/v1/ci/steps/${st.id}/log?offset=0`, `log of ${st.name}\n`, {
      'content-type': 'text/plain',
    });
    expect(log.status).toBe(200);
    if (outcome === 'running') return job.pipeline_id;
    const status = outcome === 'failure' ? 'failure' : 'success';
    expect((await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status, exit_code: 0 })).status).toBe(200);
  }
  expect(
    (await agent.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, { status: outcome })).status,
  ).toBe(200);
  return job.pipeline_id;
}

async function objects(prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const o of minio.client().listObjectsV2(BUCKET, prefix, true))
    names.push((o as { name: string }).name);
  return names;
}

/** The repository's pipelines as the API lists them: `number:status:branch`, oldest first. */
async function listed(r: GitRepo): Promise<string[]> {
  const list = await owner.client.get(`/api/v1/repos/${org}/${r.name}/pipelines?per_page=50`);
  expect(list.status).toBe(200);
  return (list.body.pipelines as { number: number; status: string; branch: string }[])
    .map((p) => `${p.number}:${p.status}:${p.branch}`)
    .reverse();
}

describe('the retention policy', () => {
  test('deletes exactly the pipelines past the days or beyond the newest 3 per repository, with their log objects', async () => {
    // A, by age: #1 main and #2 feature-old finished 10 days ago, #3 main today, #4 running, #5 pending
    const a = await gitRepo(s, owner, org);
    await push(a);
    ids.a1 = await run('success');
    await push(a, 'feature-old');
    ids.a2 = await run('failure');
    await push(a);
    ids.a3 = await run('success');
    await push(a);
    ids.a4 = await run('running');
    // B, by count: #1 on fix (oldest), #2..#7 on main, #8 running: all recent
    const b = await gitRepo(s, owner, org);
    await push(b, 'fix');
    ids.b1 = await run('success');
    for (let n = 2; n <= 7; n++) {
      await push(b);
      ids[`b${n}`] = await run(n === 3 ? 'failure' : 'success');
    }
    await push(b);
    ids.b8 = await run('running');
    // C: two recent pipelines, nothing to delete
    const c = (repoC = await gitRepo(s, owner, org));
    await push(c);
    ids.c1 = await run('success');
    await push(c);
    ids.c2 = await run('success');
    await push(a); // A #5 stays pending (never claimed)
    await db.query(`update pipelines set finished_at = now() - interval '10 days' where id = any($1)`, [
      [ids.a1, ids.a2],
    ]);
    // C #1 finished 6 days ago: within the days (and C holds fewer than 3), so it stays
    await db.query(`update pipelines set finished_at = now() - interval '6 days' where id = $1`, [ids.c1]);
    const beforeA = await listed(a);
    expect(beforeA).toEqual([
      '1:success:main',
      '2:failure:feature-old',
      '3:success:main',
      '4:running:main',
      '5:pending:main',
    ]);
    for (const id of Object.values(ids)) expect(await objects(`logs/${id}/`)).not.toEqual([]);

    // another replica holds the lock: this one deletes nothing
    const other = new pg.Client({ connectionString: s.dbUrl });
    await other.connect();
    try {
      await other.query('begin');
      await other.query('select pg_advisory_xact_lock($1)', [0x72746e74]);
      const busy = await retention().runOnce();
      expect(busy).toEqual({ deleted: [], busy: true });
      expect(await listed(a)).toEqual(beforeA);
      await other.query('commit');
    } finally {
      await other.end();
    }

    const done = await retention().runOnce();
    expect(done.busy).toBe(false);
    const gone = (id: number) => done.deleted.some((r) => r.id === id);
    expect(
      Object.entries(ids)
        .filter(([, id]) => gone(id))
        .map(([k]) => k)
        .sort(),
    ).toEqual(['a1', 'b2', 'b3', 'b4']);
    expect(await listed(a)).toEqual([
      '2:failure:feature-old',
      '3:success:main',
      '4:running:main',
      '5:pending:main',
    ]);
    expect(await listed(b)).toEqual([
      '1:success:fix',
      '5:success:main',
      '6:success:main',
      '7:success:main',
      '8:running:main',
    ]);
    expect(await listed(c)).toEqual(['1:success:main', '2:success:main']);
    for (const [k, id] of Object.entries(ids)) {
      if (['a1', 'b2', 'b3', 'b4'].includes(k)) expect(await objects(`logs/${id}/`)).toEqual([]);
      else expect(await objects(`logs/${id}/`)).not.toEqual([]);
    }
    // steps and clone tokens went with them (the web's deletion path)
    const steps = await db.query('select 1 from pipeline_steps where pipeline_id = any($1)', [
      [ids.a1, ids.b2, ids.b3, ids.b4],
    ]);
    expect(steps.rowCount).toBe(0);
    // a second run finds nothing more
    expect((await retention().runOnce()).deleted).toEqual([]);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/^triad_ci_retention_deleted_total 4$/m);
    expect(metrics).toMatch(/^triad_ci_retention_runs_total\{result="busy"\} 1$/m);
  }, 180_000);

  test('a replica runs the policy by itself every TRIAD_RETENTION_INTERVAL', async () => {
    const replica = await startServer(
      loadConfig({
        TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
        TRIAD_S3_ACCESS_KEY: minio.accessKey,
        TRIAD_S3_SECRET_KEY: minio.secretKey,
        TRIAD_S3_BUCKET: BUCKET,
        TRIAD_S3_REGION: minio.region,
        DATABASE_URL: s.dbUrl,
        PORT: '0',
        HOST: '127.0.0.1',
        TRIAD_DATA_DIR: `${s.dataDir}/replica`,
        TRIAD_REPO_DIR: `${s.dataDir}/repos`,
        TRIAD_EMBEDDED_AGENT: 'off',
        LOG_LEVEL: 'silent',
        TRIAD_LOG_REQUESTS: 'false',
        TRIAD_IDLE_GC_SECONDS: '0',
        TRIAD_RETENTION_DAYS: '7',
        TRIAD_RETENTION_INTERVAL: '200ms',
      }),
      { migrate: false },
    );
    try {
      // C #1 (not the newest of main) now finished 30 days ago
      await db.query(`update pipelines set finished_at = now() - interval '30 days' where id = $1`, [ids.c1]);
      // the row goes first; the log objects and the count follow it in the same round
      const deletedCount = async () =>
        /^triad_ci_retention_deleted_total (\d+)$/m.exec(
          await (await fetch(`${replica.url}/metrics`)).text(),
        )?.[1];
      await waitFor('the replica to delete C #1 and count it', async () =>
        (await listed(repoC)).length === 1 &&
        (await deletedCount()) !== undefined &&
        (await deletedCount()) !== '0'
          ? true
          : undefined,
      );
      expect(await listed(repoC)).toEqual(['2:success:main']);
      expect(await objects(`logs/${ids.c1}/`)).toEqual([]);
      expect(await objects(`logs/${ids.c2}/`)).not.toEqual([]);
      expect(await deletedCount()).toBe('1');
    } finally {
      await replica.close();
    }
  }, 60_000);
});
