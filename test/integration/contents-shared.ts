import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { addCommit, LOGO, MAIN_C1, MAIN_C3, populate, type Fixture } from './contents-fixture.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/** The whole contents suite for one VCS. */
export function contentsSuite(vcs: VcsKind): void {
  let s: TestServer;
  let owner: TestUser;
  let org: string;
  let repo: string;
  let base: string;
  let fx: Fixture;
  const shortLen = vcs === 'fossil' ? 10 : 12;

  beforeAll(async () => {
    ({ s, owner, org } = await serverWithOrg());
    repo = uniq(`c${vcs}`);
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs });
    expect(r.status).toBe(201);
    fx = await populate(vcs, s.running.services.repos.path({ id: r.body.data.id, vcs }));
    base = `/api/v1/repos/${org}/${repo}`;
  });
  afterAll(async () => {
    await s.close();
  });

  describe(`${vcs}: tree`, () => {
    test('the root lists directories first, then files with sizes', async () => {
      const r = await s.anon.get(`${base}/tree`);
      expect(r.status).toBe(200);
      const names = r.body.data.map((e: { name: string }) => e.name);
      expect(names[0]).toBe('src');
      expect(r.body.data).toEqual(
        expect.arrayContaining([
          { name: 'src', is_dir: true, size: 0 },
          { name: 'README.md', is_dir: false, size: 12 },
          { name: 'logo.png', is_dir: false, size: LOGO.length },
        ]),
      );
      expect(names).not.toContain('feature.txt');
      const slash = await s.anon.get(`${base}/tree/`);
      expect(slash.body).toEqual(r.body);
    });

    test('a subdirectory lists its own entries', async () => {
      const r = await s.anon.get(`${base}/tree/src`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual([
        { name: 'lib', is_dir: true, size: 0 },
        { name: 'main.c', is_dir: false, size: MAIN_C3.length },
      ]);
      const deep = await s.anon.get(`${base}/tree/src/lib`);
      expect(deep.body.data).toEqual([{ name: 'util.c', is_dir: false, size: 10 }]);
    });

    test('a missing path, a file and an unknown revision answer 404', async () => {
      for (const p of [`${base}/tree/nope`, `${base}/tree/README.md`, `${base}/tree?rev=no-such-rev`]) {
        const r = await s.anon.get(p);
        expect(r.status).toBe(404);
        expect(r.body.error.code).toBe('not_found');
      }
    });
  });

  describe(`${vcs}: blob`, () => {
    test('a text file comes back as utf-8 with its size', async () => {
      const r = await s.anon.get(`${base}/blob/README.md`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual({
        path: 'README.md',
        content: 'hello\nworld\n',
        size: 12,
        encoding: 'utf-8',
        truncated: false,
      });
      const nested = await s.anon.get(`${base}/blob/src/lib/util.c`);
      expect(nested.body.data.content).toBe('int util;\n');
    });

    test('a binary file comes back base64-encoded', async () => {
      const r = await s.anon.get(`${base}/blob/logo.png`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual({
        path: 'logo.png',
        content: LOGO.toString('base64'),
        size: LOGO.length,
        encoding: 'base64',
        truncated: false,
      });
    });

    test('a file at an old revision, a tag and a branch', async () => {
      const old = await s.anon.get(`${base}/blob/README.md?rev=${fx.c1}`);
      expect(old.body.data.content).toBe('hello\n');
      const tag = await s.anon.get(`${base}/blob/src/main.c?rev=v1.0`);
      expect(tag.status).toBe(200);
      expect(tag.body.data.content).toBe(MAIN_C1);
      const feature = await s.anon.get(`${base}/blob/feature.txt?rev=${fx.feature}`);
      expect(feature.status).toBe(200);
      expect(feature.body.data.content).toBe('feature\n');
      const dflt = await s.anon.get(`${base}/blob/src/main.c?rev=${fx.defaultBranch}`);
      expect(dflt.body.data.content).toBe(MAIN_C3);
      const short = await s.anon.get(`${base}/blob/README.md?rev=${fx.c1.slice(0, shortLen)}`);
      expect(short.body.data.content).toBe('hello\n');
      const tip = await s.anon.get(`${base}/blob/src/main.c?rev=tip`);
      expect(tip.body.data.content).toBe(MAIN_C3);
    });

    test('a directory, a missing file and an unknown revision answer 404', async () => {
      for (const p of [
        `${base}/blob/src`,
        `${base}/blob/nope.txt`,
        `${base}/blob/feature.txt`,
        `${base}/blob/README.md?rev=${'0123456789abcdef'.repeat(2)}`,
        `${base}/blob/README.md?rev=no-such-tag`,
        `${base}/blob/README.md?rev=--config%3Dextensions.evil%3D%2Ftmp%2Fevil.py`,
        `${base}/blob/README.md?rev=-1`,
      ]) {
        const r = await s.anon.get(p);
        expect([p, r.status]).toEqual([p, 404]);
        expect(r.body.error.code).toBe('not_found');
      }
    });

    test('paths escaping the repository answer 400 validation_failed', async () => {
      for (const p of [
        `${base}/blob/..%2F..%2Fetc%2Fpasswd`,
        `${base}/blob/src/..%2F..%2F..%2Fetc%2Fpasswd`,
        `${base}/tree/..%2F..`,
        `${base}/blob/%2Fetc%2Fpasswd`,
        `${base}/blob/README.md%00.txt`,
        `${base}/blob/src%5C..%5C..%5Cetc%5Cpasswd`,
        `${base}/tree/src%2F..%2F..`,
      ]) {
        const r = await s.anon.get(p);
        expect([p, r.status]).toEqual([p, 400]);
        expect(r.body.error.code).toBe('validation_failed');
      }
    });
  });

  describe(`${vcs}: log`, () => {
    test('pages newest first with total, Link and X-Total-Count', async () => {
      const total = fx.mainline.length;
      const p1 = await s.anon.get(`${base}/log?per_page=2`);
      expect(p1.status).toBe(200);
      expect(p1.body.pagination).toEqual({ page: 1, per_page: 2, total });
      expect(p1.headers.get('x-total-count')).toBe(String(total));
      expect(p1.headers.get('link')).toContain('rel="next"');
      expect(p1.body.data.map((e: { id: string }) => e.id)).toEqual(fx.mainline.slice(0, 2));
      const p2 = await s.anon.get(`${base}/log?per_page=2&page=2`);
      expect(p2.body.data.map((e: { id: string }) => e.id)).toEqual(fx.mainline.slice(2, 4));
      const all = await s.anon.get(`${base}/log`);
      expect(all.body.data.map((e: { id: string }) => e.id)).toEqual(fx.mainline);
      expect(all.body.data[0].id).toBe(fx.c3);
      const beyond = await s.anon.get(`${base}/log?page=99`);
      expect(beyond.status).toBe(200);
      expect(beyond.body.data).toEqual([]);
    });

    test('entries carry id, short_id, author, date, subject, message, branch and tags', async () => {
      const all = await s.anon.get(`${base}/log`);
      const byId = new Map(all.body.data.map((e: { id: string }) => [e.id, e]));
      const first: any = byId.get(fx.c1);
      expect(first).toEqual({
        id: fx.c1,
        short_id: fx.c1.slice(0, shortLen),
        author: expect.stringContaining(vcs === 'fossil' ? 'triad' : 'Ada Lovelace'),
        date: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        subject: 'first commit',
        message: 'first commit\n\nbody line',
        branch: fx.defaultBranch,
        tags: [],
      });
      const second: any = byId.get(fx.c2);
      expect(second.tags).toEqual(['v1.0']);
    });

    test('starts from another revision; unknown revisions answer 404', async () => {
      const r = await s.anon.get(`${base}/log?rev=${fx.c2}`);
      expect(r.status).toBe(200);
      expect(r.body.data[0].id).toBe(fx.c2);
      expect(r.body.pagination.total).toBe(fx.mainline.length - fx.mainline.indexOf(fx.c2));
      const f = await s.anon.get(`${base}/log?rev=${fx.feature}`);
      expect(f.body.data[0].subject).toBe('feature work');
      const bad = await s.anon.get(`${base}/log?rev=nope`);
      expect(bad.status).toBe(404);
      const badPage = await s.anon.get(`${base}/log?page=0`);
      expect(badPage.status).toBe(400);
    });
  });

  describe(`${vcs}: changeset`, () => {
    test('carries the log fields and a unified diff against the parent', async () => {
      const r = await s.anon.get(`${base}/changeset/${fx.c3}`);
      expect(r.status).toBe(200);
      const c = r.body.data;
      expect(c.id).toBe(fx.c3);
      expect(c.short_id).toBe(fx.c3.slice(0, shortLen));
      expect(c.subject).toBe('third commit');
      expect(c.diff).toContain('diff --git a/src/main.c b/src/main.c');
      expect(c.diff).toContain('--- a/src/main.c');
      expect(c.diff).toContain('+++ b/src/main.c');
      expect(c.diff).toContain('-int main(void) { return 0; }');
      expect(c.diff).toContain('+  return 1;');
      expect(c.diff).not.toContain('README.md');
    });

    test('the first commit shows added files; tip, short ids and tags resolve', async () => {
      const r = await s.anon.get(`${base}/changeset/${fx.c1.slice(0, shortLen)}`);
      expect(r.status).toBe(200);
      expect(r.body.data.id).toBe(fx.c1);
      expect(r.body.data.message).toBe('first commit\n\nbody line');
      expect(r.body.data.diff).toContain('+++ b/README.md');
      expect(r.body.data.diff).toContain('+hello');
      const tip = await s.anon.get(`${base}/changeset/tip`);
      expect(tip.body.data.id).toBe(fx.c3);
      const tag = await s.anon.get(`${base}/changeset/v1.0`);
      expect(tag.body.data.id).toBe(fx.c2);
      expect(tag.body.data.diff).toContain('+world');
    });

    test('an unknown revision answers 404 (a NUL in the path segment names nothing either)', async () => {
      for (const rev of ['nope', 'f'.repeat(40), 'tip%00', '..%2F..']) {
        const r = await s.anon.get(`${base}/changeset/${rev}`);
        expect([rev, r.status]).toEqual([rev, 404]);
      }
      const q = await s.anon.get(`${base}/log?rev=tip%00`);
      expect(q.status).toBe(400);
      expect(q.body.error.code).toBe('validation_failed');
    });
  });

  describe(`${vcs}: access and freshness`, () => {
    test('a private repository answers 404 to outsiders and 200 to members', async () => {
      const name = uniq(`p${vcs}`);
      const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs, is_private: true });
      expect(created.status).toBe(201);
      await populate(vcs, s.running.services.repos.path({ id: created.body.data.id, vcs }));
      const outsider = await s.newUser();
      const pb = `/api/v1/repos/${org}/${name}`;
      for (const p of [`${pb}/tree`, `${pb}/blob/README.md`, `${pb}/log`, `${pb}/changeset/tip`]) {
        expect((await s.anon.get(p)).status).toBe(404);
        expect((await outsider.client.get(p)).status).toBe(404);
        expect((await owner.client.get(p)).status).toBe(200);
      }
    });

    test('an empty repository: the contents of tip, and an empty log', async () => {
      const name = uniq(`e${vcs}`);
      const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs });
      expect(created.status).toBe(201);
      const eb = `/api/v1/repos/${org}/${name}`;
      const tree = await s.anon.get(`${eb}/tree`);
      const log = await s.anon.get(`${eb}/log`);
      if (vcs === 'fossil') {
        // `fossil new` makes an initial empty check-in: the tree is empty, the log has one entry.
        expect(tree.status).toBe(200);
        expect(tree.body.data).toEqual([]);
        expect(log.body.pagination.total).toBe(1);
      } else {
        expect(tree.status).toBe(404);
        expect(tree.body.error.message).toBe('repository is empty');
        expect(log.status).toBe(200);
        expect(log.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
        expect(log.headers.get('x-total-count')).toBe('0');
      }
    });

    test('commits pushed after a read are seen by the next read', async () => {
      const name = uniq(`f${vcs}`);
      const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs });
      const store = s.running.services.repos.path({ id: created.body.data.id, vcs });
      const fb = `/api/v1/repos/${org}/${name}`;
      const before = await populate(vcs, store);
      const r1 = await s.anon.get(`${fb}/log`);
      expect(r1.body.data[0].id).toBe(before.c3);
      // A second, unrelated population pushes more history (git/hg: new commits on top).
      const more = await addCommit(vcs, store);
      const r2 = await s.anon.get(`${fb}/log`);
      expect(r2.body.data[0].id).toBe(more);
      expect(r2.body.pagination.total).toBe(before.mainline.length + 1);
      const blob = await s.anon.get(`${fb}/blob/later.txt`);
      expect(blob.body.data.content).toBe('later\n');
    });

    test('a file read, then changed by a push, is read anew: its content, its size in the listing, the new diff', async () => {
      const name = uniq(`g${vcs}`);
      const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs });
      const store = s.running.services.repos.path({ id: created.body.data.id, vcs });
      const fb = `/api/v1/repos/${org}/${name}`;
      const before = await populate(vcs, store);
      // read first: the reader's caches now hold this file (Mercurial: its file log, its data)
      const old = (await s.anon.get(`${fb}/blob/README.md`)).body.data.content as string;
      expect((await s.anon.get(`${fb}/tree`)).status).toBe(200);
      const text = 'changed by a later commit\n';
      const more = await addCommit(vcs, store, { 'README.md': text });
      const blob = await s.anon.get(`${fb}/blob/README.md`);
      expect(blob.status).toBe(200);
      expect(blob.body.data.content).toBe(text);
      const tree = await s.anon.get(`${fb}/tree`);
      const entry = (tree.body.data as { name: string; size: number }[]).find((e) => e.name === 'README.md');
      expect(entry?.size).toBe(text.length);
      const cs = await s.anon.get(`${fb}/changeset/${more}`);
      expect(cs.status).toBe(200);
      expect(cs.body.data.diff).toContain(`+${text}`);
      // the earlier revision still reads as it did
      const earlier = await s.anon.get(`${fb}/blob/README.md?rev=${before.c3}`);
      expect(earlier.body.data.content).toBe(old);
    });
  });
}
