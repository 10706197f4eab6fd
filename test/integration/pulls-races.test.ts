import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { sh } from '../helpers/vcs.ts';
import { waitUntil } from '../helpers/wait.ts';

/**
 * Merges meeting other writers on a Git repository: a close that commits while the merge is
 * under way (held at the target's ref update by a `reference-transaction` hook in the hosted
 * repository), and a push lock another replica keeps past the merge's 60 s wait.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ TRIAD_PULL_CHECK_BUDGET_MS: '60000' }, (w) => ({ s, owner, org } = w));

const hosted = (repo: PrRepo) => path.join(s.dataDir, 'repos', `${repo.id}.git`);
const mainHead = async (repo: PrRepo) =>
  (await sh('git', ['-C', hosted(repo), 'rev-parse', 'refs/heads/main'], hosted(repo))).stdout.trim();

const exists = (f: string) =>
  fs.access(f).then(
    () => true,
    () => false,
  );

describe('pull request merges racing other writers', () => {
  test('when the PR is closed while its merge is updating the target, then the merge lands and the PR reads merged with its event', async () => {
    const repo = await PrRepo.create(owner, org, 'git');
    await repo.commitOn('racer', { 'racer.txt': 'racer\n' }, 'racer');
    const opened = await owner.client.post(`${repo.api}/pulls`, { title: 'race', source_ref: 'racer' });
    expect(opened.status).toBe(201);
    const n = opened.body.data.number as number;
    const flags = await fs.mkdtemp(path.join(s.dataDir, 'race-'));
    const hook = path.join(hosted(repo), 'hooks', 'reference-transaction');
    await fs.mkdir(path.dirname(hook), { recursive: true });
    // holds the merge's target update (under the push lock, after the status check) until told
    await fs.writeFile(
      hook,
      `#!/bin/sh\ncat >/dev/null\n[ "$1" = prepared ] || exit 0\n: > '${flags}/entered'\n` +
        `while [ ! -f '${flags}/go' ]; do sleep 0.05; done\n`,
      { mode: 0o755 },
    );
    const merging = owner.client.post(`${repo.api}/pulls/${n}/merge`, {});
    await waitUntil(
      'the merge to reach the ref update',
      () => exists(path.join(flags, 'entered')),
      60_000,
      50,
    );
    const closed = await owner.client.patch(`${repo.api}/pulls/${n}`, { state: 'closed' });
    expect(closed.status).toBe(200);
    expect(closed.body.data.status).toBe('closed');
    await fs.writeFile(path.join(flags, 'go'), '');
    const merged = await merging;
    await fs.rm(hook);
    expect(merged.status).toBe(200);
    const head = await mainHead(repo);
    expect(merged.body.data).toMatchObject({
      status: 'merged',
      merge_commit: head,
      merged_by: { id: owner.id },
    });
    expect((await owner.client.get(`${repo.api}/pulls/${n}`)).body.data).toMatchObject({
      status: 'merged',
      merge_commit: head,
    });
    const events = (await outboxEvents(s, repo.id)).filter(
      (e) => e.event_type === 'pull_request.merged' && e.payload.pull_request.number === n,
    );
    expect(events).toHaveLength(1);
    expect(events[0]!.payload.pull_request).toMatchObject({ status: 'merged', merge_commit: head });
  });

  test('when another replica holds the push lock past the wait, then the merge answers 503 service_unavailable and changes nothing', async () => {
    const repo = await PrRepo.create(owner, org, 'git');
    await repo.commitOn('busy', { 'busy.txt': 'busy\n' }, 'busy');
    const opened = await owner.client.post(`${repo.api}/pulls`, { title: 'busy', source_ref: 'busy' });
    const n = opened.body.data.number as number;
    const before = await mainHead(repo);
    const other = new pg.Client({ connectionString: s.dbUrl });
    await other.connect();
    try {
      // the lock `RepoChanges` takes (src/repos/repository.ts: "push" and the repository id)
      await other.query('select pg_advisory_lock($1, $2)', [0x70757368, repo.id]);
      const r = await owner.client.post(`${repo.api}/pulls/${n}/merge`, {});
      expect(r.status).toBe(503);
      expect(r.body.error).toMatchObject({ code: 'service_unavailable' });
      expect(r.body.error.message).toContain('busy');
    } finally {
      await other.end();
    }
    expect(await mainHead(repo)).toBe(before);
    expect((await owner.client.get(`${repo.api}/pulls/${n}`)).body.data).toMatchObject({
      status: 'open',
      merge_commit: null,
    });
  }, 180_000);
});
