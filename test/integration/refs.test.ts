/**
 * Ref lists (branches, bookmarks, tags) of all three kinds through the API, compared with what
 * the VCS's own client shows of the same stored repository; paging, the kinds without
 * bookmarks, empty repositories and private repositories.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer } from '../helpers/factories.ts';
import { ok } from '../helpers/vcs.ts';
import { addCommit } from './contents-fixture.ts';
import { refFixture, type NativeRefs } from './refs-fixture.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

/** A repository of `vcs` with the refs of refFixture (unless `build` is false): API path, store. */
async function refsRepo(vcs: VcsKind, opts: { private?: boolean; build?: boolean } = {}) {
  const repo = await newRepo(owner, org, { vcs, isPrivate: opts.private ?? false });
  const store = s.running.services.repos.path({ id: repo.id, vcs });
  if (opts.build !== false) await refFixture[vcs].build(store);
  return { base: repo.api, store };
}

const PATHS = { branch: 'branches', bookmark: 'bookmarks', tag: 'tags' } as const;
const shortLen = (vcs: VcsKind) => (vcs === 'fossil' ? 10 : 12);

describe.each(['git', 'hg', 'fossil'] as const)('%s', (vcs) => {
  let base: string;
  let native: NativeRefs;

  beforeAll(async () => {
    const repo = await refsRepo(vcs);
    base = repo.base;
    native = await refFixture[vcs].native(repo.store);
  });

  test.each(['branch', 'bookmark', 'tag'] as const)(
    'the %s list is what the VCS shows: names in order, the default marked, the head commits',
    async (type) => {
      const r = await s.anon.get(`${base}/${PATHS[type]}`);
      const want = native[type];
      if (want === undefined) {
        // Git and Fossil have no bookmarks
        expect(r.status).toBe(404);
        expect(r.body.error.code).toBe('not_found');
        expect(r.body.error.message).toMatch(/repositories have no bookmarks$/);
        return;
      }
      expect(r.status).toBe(200);
      expect(want.length).toBeGreaterThan(1);
      expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: want.length });
      expect(r.body.data).toEqual(
        want.map((n) => ({
          name: n.name,
          type,
          default: n.default,
          commit: { ...n.commit, short_id: n.commit.id.slice(0, shortLen(vcs)) },
        })),
      );
    },
  );

  test('a branch list has exactly one default, and hidden refs stay hidden', async () => {
    const branches = (await s.anon.get(`${base}/branches`)).body.data as { name: string; default: boolean }[];
    expect(branches.filter((b) => b.default).map((b) => b.name)).toEqual([
      { git: 'main', hg: 'default', fossil: 'trunk' }[vcs],
    ]);
    // closed branches (Mercurial, Fossil) and a tag of a tree (git) are not listed
    expect(branches.map((b) => b.name)).not.toContain('old');
    const tags = (await s.anon.get(`${base}/tags`)).body.data as { name: string }[];
    expect(tags.map((t) => t.name)).not.toContain(vcs === 'git' ? 'treetag' : 'tip');
    expect(tags.map((t) => t.name)).not.toContain('trunk');
  });

  test('lists are paged with Link and X-Total-Count', async () => {
    const total = native.branch.length;
    const p2 = await s.anon.get(`${base}/branches?per_page=1&page=2`);
    expect(p2.status).toBe(200);
    expect(p2.body.pagination).toEqual({ page: 2, per_page: 1, total });
    expect(p2.headers.get('x-total-count')).toBe(String(total));
    expect(p2.headers.get('link')).toContain('rel="prev"');
    expect(p2.body.data.map((b: { name: string }) => b.name)).toEqual([native.branch[1]?.name]);
    const beyond = await s.anon.get(`${base}/tags?page=50`);
    expect(beyond.status).toBe(200);
    expect(beyond.body.data).toEqual([]);
    expect(beyond.body.pagination.total).toBe(native.tag.length);
    const bad = await s.anon.get(`${base}/tags?per_page=0`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
  });

  test('an empty repository has empty lists and an empty log', async () => {
    const { base: eb } = await refsRepo(vcs, { build: false });
    const branches = await s.anon.get(`${eb}/branches`);
    const tags = await s.anon.get(`${eb}/tags`);
    const log = await s.anon.get(`${eb}/log`);
    expect([branches.status, tags.status, log.status]).toEqual([200, 200, 200]);
    expect(tags.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
    if (vcs === 'fossil') {
      // a new Fossil repository has its initial check-in on trunk
      expect(branches.body.data.map((b: { name: string; default: boolean }) => [b.name, b.default])).toEqual([
        ['trunk', true],
      ]);
      expect(log.body.pagination.total).toBe(1);
    } else {
      expect(branches.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
      expect(log.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
      // a revision that names nothing is still not found
      expect((await s.anon.get(`${eb}/log?rev=nope`)).status).toBe(404);
    }
    if (vcs === 'hg') {
      const bm = await s.anon.get(`${eb}/bookmarks`);
      expect(bm.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
    }
  });

  test('a private repository lists its refs to members and answers 404 to everyone else', async () => {
    const { base: pb, store } = await refsRepo(vcs, { private: true, build: false });
    await addCommit(vcs, store);
    const outsider = await s.newUser();
    for (const p of ['branches', 'tags', ...(vcs === 'hg' ? ['bookmarks'] : [])]) {
      for (const client of [s.anon, outsider.client]) {
        const r = await client.get(`${pb}/${p}`);
        expect([p, r.status, r.body.error?.code]).toEqual([p, 404, 'not_found']);
      }
      const mine = await owner.client.get(`${pb}/${p}`);
      expect([p, mine.status]).toEqual([p, 200]);
      if (p === 'branches') expect(mine.body.data.length).toBe(1);
    }
  });
});

test('refs pushed after a read are seen by the next read', async () => {
  const { base, store } = await refsRepo('git');
  expect((await s.anon.get(`${base}/tags`)).body.pagination.total).toBe(2);
  // a push through Triad's own path invalidates the reader; a tag written straight into the
  // store changes its ref files, which the reader checks
  await ok('git', ['-C', store, 'tag', 'v9', 'main'], store);
  const after = await s.anon.get(`${base}/tags`);
  expect(after.body.data.map((t: { name: string }) => t.name)).toEqual(['light', 'v1.0', 'v9']);
});
