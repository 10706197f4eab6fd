/**
 * What /metrics tells about pushes and clones (per kind, with results, durations and bytes), the
 * push-lock wait, the transports' queue, the database pool and the blob store, after real pushes
 * and clones with the stock git and hg clients.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { freePort } from '../../src/db/database.ts';
import { PUSH_LOCK } from '../../src/repos/repository.ts';
import { newRepo, serverWithOrg, type OrgServer } from '../helpers/factories.ts';
import { sample } from '../helpers/metrics.ts';
import { postMultipart } from '../helpers/multipart.ts';
import { pushFiles } from '../helpers/push-files.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

let w: OrgServer;
const names: string[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  w = await serverWithOrg();
  closers.push(() => w.s.close());
});
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
});

async function scrape(s: TestServer): Promise<string> {
  const r = await s.anon.get('/metrics');
  expect(r.status).toBe(200);
  return r.text;
}

describe('transfer metrics', () => {
  beforeAll(async () => {
    const { owner, org } = w;
    for (const vcs of ['git', 'hg'] as const) {
      const repo = await newRepo(owner, org, { vcs });
      names.push(repo.name);
      await pushFiles(vcs, repo.clone, owner.token, {
        'README.md': `# ${vcs}\n`,
        'data.txt': 'x'.repeat(5000),
      });
      const into = await tempDir(`triad-metrics-clone-${vcs}-`);
      await ok(vcs, ['clone', '-q', withCreds(repo.clone, owner.token), 'copy'], into);
    }
  });

  test('when a git and an hg repository are pushed and cloned, then /metrics counts each kind with its results and bytes', async () => {
    const text = await scrape(w.s);
    for (const kind of ['git', 'hg']) {
      // the push ran under the push lock; the clone's requests (and the ref listings) are fetches
      expect(
        sample(text, 'triad_vcs_transfers_total', { kind, op: 'push', result: 'ok' }),
      ).toBeGreaterThanOrEqual(1);
      expect(
        sample(text, 'triad_vcs_transfers_total', { kind, op: 'fetch', result: 'ok' }),
      ).toBeGreaterThanOrEqual(2);
      expect(
        sample(text, 'triad_vcs_transfer_duration_seconds_count', { kind, op: 'push' }),
      ).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'triad_vcs_transfer_duration_seconds_sum', { kind, op: 'push' })).toBeGreaterThan(
        0,
      );
      // the pushed pack/bundle arrived as a request body; the clone went out in the responses
      expect(sample(text, 'triad_vcs_transfer_received_bytes_total', { kind, op: 'push' })).toBeGreaterThan(
        100,
      );
      expect(sample(text, 'triad_vcs_transfer_sent_bytes_total', { kind, op: 'fetch' })).toBeGreaterThan(100);
      expect(sample(text, 'triad_push_lock_wait_seconds_count', { kind })).toBeGreaterThanOrEqual(1);
    }
    expect(sample(text, 'triad_vcs_transfers_total', { kind: 'fossil' })).toBeUndefined();
    expect(sample(text, 'triad_push_lock_timeouts_total')).toBeUndefined();
    // nothing waits or runs any more, and nothing was refused
    expect(sample(text, 'triad_transport_queued_requests')).toBe(0);
    expect(sample(text, 'triad_transport_running_requests')).toBe(0);
    expect(sample(text, 'triad_transport_refusals_total')).toBeUndefined();
    // labels never name a repository
    for (const n of names) expect(text).not.toContain(n);
  });

  test('when a body is larger than the transport allows, then the refusal is counted by its reason', async () => {
    const s = await startTestServer({ TRIAD_TRANSPORT_MAX_BODY_BYTES: '1024' });
    closers.push(() => s.close());
    const owner = await s.newUser();
    const repo = await newRepo(owner, await s.newOrg(owner), { vcs: 'git' });
    const r = await fetch(`${repo.clone}/git-upload-pack`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${owner.token}`,
        'content-type': 'application/x-git-upload-pack-request',
      },
      body: Buffer.alloc(4096, 0x30),
    });
    expect(r.status).toBe(413);
    const text = await scrape(s);
    expect(sample(text, 'triad_transport_refusals_total', { reason: 'body_too_large' })).toBe(1);
    expect(sample(text, 'triad_vcs_transfers_total', { kind: 'git', op: 'fetch', result: 'too_large' })).toBe(
      1,
    );
  });
});

describe('push-lock metrics', () => {
  test('when another push holds the push lock past the transfer timeout, then the timeout is counted, and the next push its wait', async () => {
    // short enough for the refused push, long enough for the next push's requests on a loaded
    // machine (2 s was not always)
    const s = await startTestServer({ TRIAD_TRANSPORT_TIMEOUT_SECONDS: '6' });
    closers.push(() => s.close());
    const owner = await s.newUser();
    const repo = await newRepo(owner, await s.newOrg(owner), { vcs: 'git' });
    const work = await tempDir('triad-metrics-lock-');
    await ok('git', ['init', '-q', '-b', 'main', '.'], work);
    await writeFile(work, 'a.txt', 'a\n');
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'a'], work);
    // a push of another replica holds the repository's lock (in its transaction)
    const other = new pg.Client({ connectionString: s.dbUrl });
    await other.connect();
    await other.query('begin');
    await other.query('select pg_advisory_xact_lock($1, $2)', [PUSH_LOCK, repo.id]);
    const refused = await sh('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    await other.query('rollback');
    await other.end();
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('504');
    let text = await scrape(s);
    expect(sample(text, 'triad_push_lock_timeouts_total', { kind: 'git' })).toBe(1);
    expect(sample(text, 'triad_vcs_transfers_total', { kind: 'git', op: 'push', result: 'timeout' })).toBe(1);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    text = await scrape(s);
    expect(sample(text, 'triad_push_lock_wait_seconds_count', { kind: 'git' })).toBe(1);
    expect(sample(text, 'triad_vcs_transfers_total', { kind: 'git', op: 'push', result: 'ok' })).toBe(1);
  });
});

describe('database pool and blob store metrics', () => {
  test('when the server runs, then the pool of its database connections is shown', async () => {
    const text = await scrape(w.s);
    expect(sample(text, 'triad_db_pool_connections_max', { pool: 'main' })).toBe(20);
    const idle = sample(text, 'triad_db_pool_connections_idle', { pool: 'main' }) ?? -1;
    const inUse = sample(text, 'triad_db_pool_connections_in_use', { pool: 'main' }) ?? -1;
    // the requests before this one left open connections in the pool
    expect(idle).toBeGreaterThanOrEqual(1);
    expect(inUse).toBeGreaterThanOrEqual(0);
    expect(idle + inUse).toBeLessThanOrEqual(20);
    // (callers waiting while a connection opens count too: the scrape's own queries may)
    expect(sample(text, 'triad_db_pool_waiting_requests', { pool: 'main' })).toBeGreaterThanOrEqual(0);
  });

  test('when a release asset is stored, then the blob store latency is shown by operation and backend', async () => {
    const { owner, org, s } = w;
    const repo = await newRepo(owner, org, { vcs: 'git' });
    await pushFiles('git', repo.clone, owner.token, { 'a.txt': 'a\n' });
    const tag = await owner.client.post(`${repo.api}/releases`, { tag_name: 'v1', target_commitish: 'main' });
    expect(tag.status).toBe(201);
    const up = await postMultipart(`${s.url}${repo.api}/releases/${tag.body.data.id}/assets`, owner.token, [
      { field: 'attachment', filename: 'a.bin', data: Buffer.alloc(2048, 1) },
    ]);
    expect(up.status).toBe(201);
    const text = await scrape(s);
    expect(sample(text, 'triad_blob_operation_duration_seconds_count', { op: 'put', backend: 'fs' })).toBe(1);
    expect(sample(text, 'triad_blob_operation_errors_total')).toBeUndefined();
  });

  test('when the S3 endpoint cannot be reached, then its failures are counted', async () => {
    const port = await freePort();
    const s = await startTestServer({
      TRIAD_S3_ENDPOINT: `http://127.0.0.1:${port}`,
      TRIAD_S3_ACCESS_KEY: 'none',
      TRIAD_S3_SECRET_KEY: 'nonenonenone',
    });
    closers.push(() => s.close());
    const text = await scrape(s);
    // the bucket check at start failed
    expect(
      sample(text, 'triad_blob_operation_errors_total', { op: 'init', backend: 's3' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(text, 'triad_blob_operation_duration_seconds_count', { op: 'init', backend: 's3' }),
    ).toBeGreaterThanOrEqual(1);
  });
});
