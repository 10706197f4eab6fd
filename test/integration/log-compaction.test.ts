/**
 * Step-log compaction with the S3 blob store on a real MinIO server: a step that wrote for a while
 * (the real agent, one chunk per 250 ms flush) leaves ONE log object once compacted, and the API's
 * log read, the web's ranged reads and the web's live log from an offset answer the same bytes
 * before and after; a reader that started before a compaction gets every byte though the objects
 * it was reading are deleted under it; a step the server ends (a cancel) is compacted as well;
 * two compactions of one step at once leave one object; a chunk stored after the step ended is
 * compacted again.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { pino } from 'pino';
import { Agent } from '../../agent/agent.ts';
import { LocalExecutor } from '../../agent/executors/local.ts';
import { commitFiles, gitRepo, newAgent, TWO_STEPS, type GitRepo } from '../helpers/ci.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { startTestServer, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { webSessionCookie } from '../helpers/web-session.ts';

const BUCKET = 'triad-compaction';
let minio: MinioServer;
let s: TestServer;
let owner: TestUser;
let org: string;
let cookie: string;
let db: pg.Client;

beforeAll(async () => {
  minio = await startMinio();
  s = await startTestServer({
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: BUCKET,
    TRIAD_S3_REGION: minio.region,
    TRIAD_LOG_COMPACTION_INTERVAL: '100ms',
    // the replaced objects go at once: readers that started before must cope without a grace
    TRIAD_LOG_COMPACTION_GRACE: '0',
  });
  owner = await s.newUser();
  org = await s.newOrg(owner);
  cookie = await webSessionCookie(s, owner);
  db = new pg.Client({ connectionString: s.dbUrl });
  await db.connect();
}, 120_000);
afterAll(async () => {
  await db?.end();
  await s?.close();
  await minio?.stop();
});

async function objects(prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const o of minio.client().listObjectsV2(BUCKET, prefix, true))
    names.push((o as { name: string }).name);
  return names.sort();
}

async function chunkRows(stepId: number): Promise<{ offset: number; size: number; key: string }[]> {
  const r = await db.query<{ offset: string; size: number; blob_key: string }>(
    'select "offset", size, blob_key from step_log_chunks where step_id = $1 order by "offset"',
    [stepId],
  );
  return r.rows.map((x) => ({ offset: Number(x.offset), size: x.size, key: x.blob_key }));
}

/**
 * Holds the step's compaction back: a marker due in an hour, which the triggers leave as it is
 * when the step ends (`due` lets it go).
 */
async function holdCompaction(stepId: number): Promise<{ due: () => Promise<void> }> {
  await db.query(
    `insert into step_log_compactions (step_id, due_at) values ($1, now() + interval '1 hour')`,
    [stepId],
  );
  return {
    due: async () => {
      await db.query('update step_log_compactions set due_at = now() where step_id = $1', [stepId]);
    },
  };
}

/** Waits until the step's log is one row and one object (the row's). */
async function compacted(pipelineId: number, stepId: number): Promise<string> {
  return waitFor('the step log compacted into one object', async () => {
    const rows = await chunkRows(stepId);
    const objs = await objects(`logs/${pipelineId}/${stepId}/`);
    return rows.length === 1 && objs.length === 1 && objs[0] === rows[0]!.key ? objs[0] : undefined;
  });
}

type Reads = { api: string; ranges: string[]; live: string };

const RANGES = ['bytes=0-99', 'bytes=1000-2999', 'bytes=2500-', 'bytes=-700', 'bytes=1234-1234'];

/** What a reader sees of step 1 of pipeline 1: the API's log, ranged web reads, the live log from an offset. */
async function reads(repo: GitRepo, offset: number): Promise<Reads> {
  const api = await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/1/log`);
  expect(api.status).toBe(200);
  const web = `${s.url}/${org}/${repo.name}/-/pipelines/1/steps/1`;
  const ranges: string[] = [];
  for (const range of RANGES) {
    const r = await fetch(`${web}/raw`, { headers: { cookie, range } });
    expect(r.status).toBe(206);
    ranges.push(await r.text());
  }
  const live = await fetch(`${web}/live?offset=${offset}`, { headers: { cookie } });
  expect(live.status).toBe(200);
  const events = (await live.text()).split('\n\n');
  expect(events.some((e) => e.startsWith('event: done'))).toBe(true);
  const text = events
    .filter((e) => e.includes('event: log'))
    .map((e) => JSON.parse(/^data: (.*)$/m.exec(e)![1]!) as string)
    .join('');
  return { api: api.text, ranges, live: text };
}

describe('step-log compaction', () => {
  test('a step that wrote for a while leaves one log object, and every read answers the same bytes before and after', async () => {
    const repo = await gitRepo(s, owner, org);
    const lines = 120;
    const script = `for i in $(seq 1 ${lines}); do printf 'line %03d of the loud step\\n' $i; sleep 0.02; done`;
    await commitFiles(repo, {
      '.pipeline.yml': `steps:\n  - name: loud\n    image: alpine\n    commands: [${JSON.stringify(script)}]\n`,
    });
    await repo.push();
    const pipe = (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`)).body;
    const stepId = pipe.steps[0].id as number;
    const hold = await holdCompaction(stepId);
    const token = (await s.admin.post('/api/v1/admin/agents', { name: 'compaction-agent' })).body.data.token;
    const agent = new Agent({
      server: s.url,
      token,
      instance: 'jest',
      capacity: 1,
      executor: new LocalExecutor(),
      log: pino({ level: 'silent' }),
      pollWait: 1,
    });
    await agent.start();
    let done: { status: string };
    try {
      done = await waitFor('the pipeline to finish', async () => {
        const p = (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`)).body;
        return ['success', 'failure', 'error', 'cancelled'].includes(p.status) ? p : undefined;
      });
    } finally {
      await agent.stop();
    }
    expect(done.status).toBe('success');
    const expected = Array.from(
      { length: lines },
      (_, i) => `line ${String(i + 1).padStart(3, '0')} of the loud step\n`,
    ).join('');
    const prefix = `logs/${pipe.id}/${stepId}/`;
    const chunks = await chunkRows(stepId);
    expect(chunks.length).toBeGreaterThanOrEqual(5); // shipped in many flushes
    expect(await objects(prefix)).toEqual(chunks.map((c) => c.key).sort());
    const offset = chunks[2]!.offset + 3; // inside a chunk, past the first ones
    const before = await reads(repo, offset);
    expect(before.api).toBe(expected);
    expect(before.live).toBe(expected.slice(offset));
    expect(before.ranges).toEqual([
      expected.slice(0, 100),
      expected.slice(1000, 3000),
      expected.slice(2500),
      expected.slice(-700),
      expected.slice(1234, 1235),
    ]);

    await hold.due();
    const key = await compacted(pipe.id, stepId);
    expect(await chunkRows(stepId)).toEqual([{ offset: 0, size: expected.length, key }]);
    expect(await objects(prefix)).toEqual([key]);
    expect(await reads(repo, offset)).toEqual(before);
    // done: the marker is gone, and nothing is left waiting for deletion
    const left = await db.query('select 1 from step_log_compactions where step_id = $1', [stepId]);
    expect(left.rowCount).toBe(0);
    const garbage = await db.query('select 1 from log_blob_garbage where step_id = $1', [stepId]);
    expect(garbage.rowCount).toBe(0);
  }, 90_000);

  describe('through the agent protocol', () => {
    let agent: Client;
    beforeAll(async () => {
      agent = await newAgent(s);
    });

    /** A claimed pipeline whose first step is running with `parts` appended (one chunk each). */
    async function stepWith(parts: string[]): Promise<{ pipelineId: number; stepId: number; repo: GitRepo }> {
      const repo = await gitRepo(s, owner, org);
      await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
      await repo.push();
      const job = (await agent.post('/api/v1/ci/poll')).body;
      const stepId = job.steps[0].id as number;
      expect((await agent.put(`/api/v1/ci/steps/${stepId}/status`, { status: 'running' })).status).toBe(200);
      for (const p of parts) {
        const r = await agent.post(`/api/v1/ci/steps/${stepId}/log`, p, { 'content-type': 'text/plain' });
        expect(r.status).toBe(200);
      }
      return { pipelineId: job.pipeline_id as number, stepId, repo };
    }

    const ended = async (stepId: number) =>
      expect(
        (await agent.put(`/api/v1/ci/steps/${stepId}/status`, { status: 'success', exit_code: 0 })).status,
      ).toBe(200);

    test('a reader that started before the compaction reads every byte, though its objects are deleted under it', async () => {
      const parts = Array.from({ length: 6 }, (_, i) => `${String(i).repeat(1000)}\n`);
      const { pipelineId, stepId } = await stepWith(parts);
      const hold = await holdCompaction(stepId);
      await ended(stepId);
      const whole = parts.join('');
      const reader = s.running.services.pipelines.stepLogs.range(stepId, 10, whole.length - 10);
      const first = await reader.next(); // the first chunk's bytes, read from its own object
      expect(first.done).toBe(false);
      const oldKeys = (await chunkRows(stepId)).map((c) => c.key);
      await hold.due();
      const key = await compacted(pipelineId, stepId);
      expect(oldKeys).not.toContain(key);
      for (const k of oldKeys)
        expect(
          await minio
            .client()
            .statObject(BUCKET, k)
            .catch(() => 'gone'),
        ).toBe('gone');
      const rest: Buffer[] = [first.value as Buffer];
      for await (const piece of reader) rest.push(piece);
      expect(Buffer.concat(rest).toString()).toBe(whole.slice(10, whole.length - 10));
    }, 60_000);

    test('a step a user cancels is compacted too (the server ended it, not the agent)', async () => {
      const { pipelineId, stepId, repo } = await stepWith(['a\n', 'b\n', 'c\n']);
      const cancel = await owner.client.post(`/api/v1/repos/${org}/${repo.name}/pipelines/1/cancel`);
      expect(cancel.status).toBe(200);
      expect(cancel.body.steps[0].status).toBe('cancelled');
      const key = await compacted(pipelineId, stepId);
      expect(await chunkRows(stepId)).toEqual([{ offset: 0, size: 6, key }]);
      const log = await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/1/log`);
      expect(log.text).toBe('a\nb\nc\n');
    }, 60_000);

    test('two replicas compacting the same step at once leave one object (the loser removes its own)', async () => {
      const parts = ['x\n', 'y\n', 'z\n', 'w\n'];
      const { pipelineId, stepId, repo } = await stepWith(parts);
      await holdCompaction(stepId);
      await ended(stepId);
      const compactor = s.running.services.pipelines.compactor;
      const results = await Promise.all([compactor.compactStep(stepId), compactor.compactStep(stepId)]);
      expect(results.filter((r) => r).length).toBe(1);
      await compactor.sweep();
      const key = await compacted(pipelineId, stepId);
      expect(await chunkRows(stepId)).toEqual([{ offset: 0, size: 8, key }]);
      const log = await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/1/log`);
      expect(log.text).toBe(parts.join(''));
      // and once more, as a marker claimed again after a crash would: nothing changes
      expect(await compactor.compactStep(stepId)).toBe(false);
      expect(await objects(`logs/${pipelineId}/${stepId}/`)).toEqual([key]);
    }, 60_000);

    test('a chunk stored after the step ended (and was compacted) is compacted again', async () => {
      const { pipelineId, stepId, repo } = await stepWith(['one\n', 'two\n', 'three\n']);
      await ended(stepId);
      await compacted(pipelineId, stepId);
      // a late tail (an agent still shipping a cancelled step's output, say)
      const late = await agent.post(`/api/v1/ci/steps/${stepId}/log?offset=14`, 'four\n', {
        'content-type': 'text/plain',
      });
      expect(late.status).toBe(200);
      const key = await waitFor('the late chunk compacted', async () => {
        const rows = await chunkRows(stepId);
        return rows.length === 1 && rows[0]!.size === 19 ? rows[0]!.key : undefined;
      });
      await waitFor('one object left', async () =>
        (await objects(`logs/${pipelineId}/${stepId}/`)).length === 1 ? true : undefined,
      );
      expect(await objects(`logs/${pipelineId}/${stepId}/`)).toEqual([key]);
      const log = await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/1/log`);
      expect(log.text).toBe('one\ntwo\nthree\nfour\n');
    }, 60_000);
  });
});
