/**
 * The earlier API variant names commits by `node`, `short_node` and `rev` (docs/api-variants.md):
 * Mercurial's revision number and Fossil's rid as the VCS has them in the stored repository, and
 * for Git the commit's position in the sequence commits arrived in, recorded by every change
 * (pushes, pull request merges) and caught up when a number is asked for an unrecorded commit.
 * Changesets, log entries and the commits of ref lists; the current variant keeps `id` and
 * `short_id`. Every answer here is checked against the document of its variant.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { withOrgServer } from '../helpers/factories.ts';
import { MAINLINE, PrRepo, settled } from '../helpers/pulls.ts';
import type { Client, TestServer, TestUser } from '../helpers/server.ts';
import { ok, sh } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const EARLIER = { 'X-Svc-Api-Variant': 'earlier' };
const earlier = (c: Client, path: string) => c.get(path, EARLIER);

/** The number the VCS itself gives a commit in the stored repository (Mercurial, Fossil). */
async function nativeRev(kind: VcsKind, store: string, id: string): Promise<number> {
  if (kind === 'hg')
    return Number(await ok('/usr/bin/hg', ['-R', store, 'log', '-r', id, '-T', '{rev}'], '/'));
  const sql = `SELECT rid FROM blob WHERE uuid = '${id}'`;
  return Number((await ok('fossil', ['sql', '-R', store, sql], '/')).trim());
}

describe.each(['git', 'hg', 'fossil'] as const)('%s', (kind) => {
  let repo: PrRepo;
  let store: string;

  beforeAll(async () => {
    repo = await PrRepo.create(owner, org, kind);
    await repo.commitOn(MAINLINE[kind], { 'a.txt': 'a\n' }, 'second');
    store = s.running.services.repos.path({ id: repo.id, vcs: kind });
  });

  test('the log and the changeset answer node, short_node and rev in the earlier variant, id and short_id in the current', async () => {
    const log = await earlier(owner.client, `${repo.api}/log`);
    expect(log.status).toBe(200);
    expect(log.headers.get('x-svc-api-variant')).toBe('earlier');
    const entries = log.body.data as { node: string; short_node: string; rev: number }[];
    expect(entries.length).toBeGreaterThanOrEqual(2);
    for (const e of entries) {
      expect(e).not.toHaveProperty('id');
      expect(e).not.toHaveProperty('short_id');
      expect(e.node.startsWith(e.short_node)).toBe(true);
      expect(Number.isInteger(e.rev)).toBe(true);
    }
    // newest first, so the revision numbers go down
    expect(entries[0]!.rev).toBeGreaterThan(entries[1]!.rev);
    if (kind === 'git') expect(entries.map((e) => e.rev)).toEqual([1, 0]);
    else for (const e of entries) expect(e.rev).toBe(await nativeRev(kind, store, e.node));

    const tip = await earlier(owner.client, `${repo.api}/changeset/${entries[0]!.node}`);
    expect(tip.status).toBe(200);
    expect(tip.body.data).toMatchObject({ node: entries[0]!.node, rev: entries[0]!.rev, subject: 'second' });
    expect(tip.body.data).not.toHaveProperty('id');
    expect(tip.body.data.diff).toContain('a.txt');

    const current = await owner.client.get(`${repo.api}/changeset/${entries[0]!.node}`);
    expect(current.body.data).toMatchObject({ id: entries[0]!.node, short_id: entries[0]!.short_node });
    expect(current.body.data).not.toHaveProperty('rev');
    expect(current.body.data).not.toHaveProperty('node');
    const currentLog = await owner.client.get(`${repo.api}/log`);
    expect(currentLog.body.data.map((e: { id: string }) => e.id)).toEqual(entries.map((e) => e.node));
  });

  test('the commits of ref lists carry the same node and rev', async () => {
    const log = await earlier(s.anon, `${repo.api}/log?per_page=1`);
    const head = log.body.data[0];
    const branches = await earlier(s.anon, `${repo.api}/branches`);
    expect(branches.status).toBe(200);
    const main = branches.body.data.find((b: { default: boolean }) => b.default);
    expect(main.commit).toEqual({
      node: head.node,
      short_node: head.short_node,
      rev: head.rev,
      subject: head.subject,
      author: head.author,
      date: head.date,
    });
    const current = await s.anon.get(`${repo.api}/branches`);
    const plain = current.body.data.find((b: { default: boolean }) => b.default);
    expect(plain.commit.id).toBe(head.node);
    expect(plain.commit).not.toHaveProperty('rev');
  });

  test('the two variants’ answers of one commit have different ETags', async () => {
    const cur = await owner.client.get(`${repo.api}/changeset/tip`);
    const old = await earlier(owner.client, `${repo.api}/changeset/tip`);
    const etag = cur.headers.get('etag')!;
    expect(old.headers.get('etag')).not.toBe(etag);
    const again = await owner.client.get(`${repo.api}/changeset/tip`, { ...EARLIER, 'If-None-Match': etag });
    expect(again.status).toBe(200);
    const same = await owner.client.get(`${repo.api}/changeset/tip`, {
      ...EARLIER,
      'If-None-Match': old.headers.get('etag')!,
    });
    expect(same.status).toBe(304);
  });
});

describe('git: the recorded sequence', () => {
  let repo: PrRepo;

  beforeAll(async () => {
    repo = await PrRepo.create(owner, org, 'git');
  });

  const revs = async () => {
    const r = await earlier(owner.client, `${repo.api}/log?per_page=100`);
    expect(r.status).toBe(200);
    return new Map((r.body.data as { node: string; rev: number }[]).map((e) => [e.node, e.rev]));
  };

  test('commits are numbered as they arrive: pushes, then a pull request’s merge commit', async () => {
    await repo.commitOn('feature', { 'f.txt': 'f\n' }, 'feature work');
    await repo.commitOn('main', { 'm.txt': 'm\n' }, 'main work');
    // main's history: `first` (0) and `main work` (2); `feature work` arrived in between (1)
    const before = await revs();
    expect([...before.values()].sort()).toEqual([0, 2]);
    const branches = await earlier(owner.client, `${repo.api}/branches`);
    const feature = branches.body.data.find((b: { name: string }) => b.name === 'feature');
    expect(feature.commit.rev).toBe(1);

    const pr = await owner.client.post(`${repo.api}/pulls`, { title: 'merge', source_ref: 'feature' });
    expect(pr.status).toBe(201);
    await settled(owner.client, `${repo.api}/pulls/${pr.body.data.number}`);
    const merged = await owner.client.post(`${repo.api}/pulls/${pr.body.data.number}/merge`);
    expect(merged.status).toBe(200);
    const after = await revs();
    const mergeCommit = merged.body.data.merge_commit as string;
    expect(after.get(mergeCommit)).toBe(3);
    // the numbers once given never change
    for (const [node, rev] of before) if (after.has(node)) expect(after.get(node)).toBe(rev);
  });

  test('a repository whose sequence is missing (older than it) is numbered on the first ask, parents first, for good', async () => {
    const db = new pg.Client({ connectionString: s.dbUrl });
    await db.connect();
    try {
      await db.query('delete from commit_revs where repo_id = $1', [repo.id]);
    } finally {
      await db.end();
    }
    const first = await revs();
    const log = await owner.client.get(`${repo.api}/log?per_page=100`);
    const ids = (log.body.data as { id: string }[]).map((e) => e.id);
    // every commit numbered 0..n-1, the root first and the newest (the merge) last
    expect([...first.values()].sort((a, b) => a - b)).toEqual(ids.map((_, i) => i));
    expect(first.get(ids[ids.length - 1]!)).toBe(0);
    expect(first.get(ids[0]!)).toBe(ids.length - 1);
    expect(await revs()).toEqual(first);
  });

  test('a commit no ref reaches any more (left behind by a force push) still gets a number', async () => {
    const head = (await owner.client.get(`${repo.api}/changeset/main`)).body.data.id as string;
    const work = repo.w.dir;
    await repo.pull();
    await ok('git', ['checkout', '-q', '-B', 'main', 'origin/main'], work);
    await ok('git', ['reset', '-q', '--hard', 'HEAD~1'], work);
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'rewritten'], work);
    const url = repo.w.url.replace('://', `://x:${repo.w.token}@`);
    expect((await sh('git', ['push', '-q', '-f', url, 'main'], work)).code).toBe(0);
    const old = await earlier(owner.client, `${repo.api}/changeset/${head}`);
    expect(old.status).toBe(200);
    expect(Number.isInteger(old.body.data.rev)).toBe(true);
    const now = await earlier(owner.client, `${repo.api}/changeset/main`);
    expect(now.body.data.rev).not.toBe(old.body.data.rev);
    expect(now.body.data.subject).toBe('rewritten');
  });
});
