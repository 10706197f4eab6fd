/**
 * Releases on all three kinds: a tag pushed with the stock client is found; a release with
 * `target_commitish` creates its tag through the one repository-change path (the `tag` event is
 * recorded like a pushed tag's; Mercurial commits `.hgtags`, Fossil adds a tag artifact); source
 * archives stream as tar.gz and zip.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { WorkingCopy } from '../helpers/clients.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { ok, tempDir, withCreds } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

const exec = promisify(execFile);
let s: TestServer;
let owner: TestUser;
let org: string;

withOrgServer({}, (w) => ({ s, owner, org } = w));

/** The entries of an archive (tar.gz or zip), listed by the system tools. */
async function entries(bytes: Buffer, format: 'tar.gz' | 'zip'): Promise<string[]> {
  const dir = await tempDir('triad-archive-');
  const file = `${dir}/a.${format}`;
  await import('node:fs/promises').then((fs) => fs.writeFile(file, bytes));
  const out =
    format === 'zip'
      ? (await exec('unzip', ['-Z1', file])).stdout
      : (await exec('tar', ['-tzf', file])).stdout;
  return out.split('\n').filter((l) => l !== '' && !l.endsWith('/'));
}

/** Pushes a tag made with the stock client of `kind` at the working copy's head. */
async function pushTag(w: WorkingCopy, tag: string): Promise<void> {
  switch (w.kind) {
    case 'git':
      await ok('git', ['tag', tag], w.dir);
      await ok('git', ['push', '-q', withCreds(w.url, w.token), tag], w.dir);
      return;
    case 'hg':
      await ok('hg', ['tag', tag], w.dir);
      await ok('hg', ['push', '-q', withCreds(w.url, w.token)], w.dir);
      return;
    case 'fossil':
      await ok('fossil', ['tag', 'add', tag, 'trunk'], w.dir);
      await ok('fossil', ['push', '-B', `x:${w.token}`, w.url], w.dir);
  }
}

const DEFAULT: Record<VcsKind, string> = { git: 'main', hg: 'default', fossil: 'trunk' };
/** A tag name each VCS refuses. */
const BAD_TAG: Record<VcsKind, string> = { git: 'bad..name', hg: 'bad:name', fossil: 'bad name' };

describe.each(['git', 'hg', 'fossil'] as const)('releases on %s', (kind) => {
  let repo: { name: string; id: number; clone: string };
  let w: WorkingCopy;
  let head: string;
  let lineHead: string;
  let base: string;

  beforeAll(async () => {
    const name = uniq(kind);
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: kind });
    expect(r.status).toBe(201);
    repo = { name, id: r.body.data.id, clone: r.body.data.clone_url };
    w = await WorkingCopy.clone(kind, repo.clone, owner.token);
    await w.commit('hello.txt', 'hello\n', 'first');
    await w.commit('src/lib.txt', 'lib\n', 'second');
    expect((await w.push()).code).toBe(0);
    head = await w.head();
    base = `/api/v1/repos/${org}/${name}/releases`;
  });

  /** The tags the server has, as the stock client sees them. */
  async function clientTags(): Promise<string[]> {
    const url = withCreds(repo.clone, owner.token);
    const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
    switch (kind) {
      case 'git':
        return lines(await ok('git', ['ls-remote', '--tags', url], w.dir)).map((l) =>
          l.split('\t')[1]!.replace(/^refs\/tags\//, ''),
        );
      case 'hg':
        await ok('hg', ['pull', '-q', url], w.dir);
        return lines(await ok('hg', ['tags', '-T', '{tag}\n'], w.dir));
      case 'fossil':
        await ok('fossil', ['pull', '-B', `x:${owner.token}`, repo.clone], w.dir);
        return lines(await ok('fossil', ['tag', 'list'], w.dir)).map((l) => l.trim());
    }
  }

  test('when the tag was pushed with the client, then a release for it points at its commit', async () => {
    await pushTag(w, 'v0.1');
    // Mercurial's tag is a commit: the default line moved on to it
    lineHead = kind === 'hg' ? (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w.dir)).trim() : head;
    const r = await owner.client.post(base, { tag_name: 'v0.1' });
    expect(r.status).toBe(201);
    expect(r.body.data.target_commitish.startsWith(head)).toBe(true); // fossil info shows a prefix
  });

  test('when target_commitish names the default line, then the tag is created there and a tag event recorded', async () => {
    const r = await owner.client.post(base, {
      tag_name: 'v1.0',
      target_commitish: DEFAULT[kind],
      name: 'One',
    });
    expect(r.status).toBe(201);
    expect(r.body.data.target_commitish).toBe(DEFAULT[kind]);
    const events = (await outboxEvents(s, repo.id)).filter((e) => e.event_type === 'tag');
    const created = events.find((e) => e.payload.ref === 'v1.0');
    expect(created).toBeDefined();
    expect(created!.sender_id).toBe(owner.id);
    expect(created!.payload).toMatchObject({ ref_type: 'tag', created: true });
    expect(created!.payload.target.startsWith(lineHead)).toBe(true);
    // the clients see the tag
    switch (kind) {
      case 'git': {
        const ls = await ok('git', ['ls-remote', '--tags', withCreds(repo.clone, owner.token)], w.dir);
        expect(ls).toContain(`${head}\trefs/tags/v1.0`);
        break;
      }
      case 'hg': {
        await ok('hg', ['pull', '-q', withCreds(repo.clone, owner.token)], w.dir);
        const tags = await ok('hg', ['tags', '-T', '{tag} {node}\n'], w.dir);
        expect(tags).toContain(`v1.0 ${lineHead}`);
        const log = await ok('hg', ['log', '-r', 'tip', '-T', '{files}'], w.dir);
        expect(log).toBe('.hgtags');
        break;
      }
      case 'fossil': {
        await ok('fossil', ['pull', '-B', `x:${owner.token}`, repo.clone], w.dir);
        const tags = await ok('fossil', ['tag', 'list', lineHead], w.dir);
        expect(tags).toContain('v1.0');
        break;
      }
    }
  });

  test('when target_commitish is a commit id, then the tag is created at that commit', async () => {
    const r = await owner.client.post(base, { tag_name: 'at-commit', target_commitish: head });
    expect(r.status).toBe(201);
    expect((await owner.client.get(`${base}/tags/at-commit`)).body.data.id).toBe(r.body.data.id);
    const unknown = await owner.client.post(base, { tag_name: 'nowhere', target_commitish: 'no-such-line' });
    expect(unknown.status).toBe(422);
  });

  test('when a draft names a new tag with target_commitish, then the tag is created only when the draft is published', async () => {
    const api = `/api/v1/repos/${org}/${repo.name}`;
    const lineNow = async () => (await owner.client.get(`${api}/changeset/${DEFAULT[kind]}`)).body.data.id;
    const tagEvents = async () =>
      (await outboxEvents(s, repo.id)).filter((e) => e.event_type === 'tag' && e.payload.ref === 'v2.0');
    const before = await lineNow();
    const r = await owner.client.post(base, {
      tag_name: 'v2.0',
      target_commitish: DEFAULT[kind],
      name: 'Two',
      draft: true,
    });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ draft: true, published_at: null, target_commitish: DEFAULT[kind] });
    // nothing of the draft reaches the repository: no tag (Mercurial: no .hgtags commit), no event
    expect(await clientTags()).not.toContain('v2.0');
    expect(await lineNow()).toBe(before);
    expect(await tagEvents()).toEqual([]);
    expect((await s.anon.get(`${api}/archive/v2.0.zip`)).status).toBe(404);
    // a draft's target is still checked when it is made
    const bad = await owner.client.post(base, {
      tag_name: 'v2.1',
      target_commitish: 'no-such-line',
      draft: true,
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('unprocessable');

    // published: the tag is made then, at the head of the line, through the change path
    const p = await owner.client.patch(`${base}/${r.body.data.id}`, { draft: false });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ draft: false, tag_name: 'v2.0', target_commitish: DEFAULT[kind] });
    expect(p.body.data.published_at).not.toBeNull();
    const events = await tagEvents();
    expect(events).toHaveLength(1);
    expect(events[0]!.sender_id).toBe(owner.id);
    expect(events[0]!.payload).toMatchObject({ ref_type: 'tag', created: true, target: before });
    expect(await clientTags()).toContain('v2.0');
    expect((await s.anon.get(`${api}/archive/v2.0.zip`)).status).toBe(200);
    // publishing again changes nothing
    expect((await owner.client.patch(`${base}/${r.body.data.id}`, { draft: false })).status).toBe(200);
    expect(await tagEvents()).toHaveLength(1);

    // a tag name the VCS refuses is known when the tag is made: publishing is 422, it stays a draft
    const name = BAD_TAG[kind];
    const refused = await owner.client.post(base, {
      tag_name: name,
      target_commitish: DEFAULT[kind],
      draft: true,
    });
    expect(refused.status).toBe(201);
    const publish = await owner.client.patch(`${base}/${refused.body.data.id}`, { draft: false });
    expect(publish.status).toBe(422);
    expect(publish.body.error.code).toBe('unprocessable');
    expect((await owner.client.get(`${base}/${refused.body.data.id}`)).body.data).toMatchObject({
      draft: true,
      published_at: null,
    });
    expect(await clientTags()).not.toContain(name);
    expect((await owner.client.delete(`${base}/${refused.body.data.id}`)).status).toBe(204);
  });

  test.each(['tar.gz', 'zip'] as const)(
    'when the %s archive of the tag is fetched, then it holds the files',
    async (format) => {
      const rel = (await s.anon.get(`${base}/tags/v1.0`)).body.data;
      const url = format === 'zip' ? rel.zipball_url : rel.tarball_url;
      const r = await fetch(url);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe(format === 'zip' ? 'application/zip' : 'application/gzip');
      expect(r.headers.get('content-disposition')).toContain(`${repo.name}-v1.0.${format}`);
      const files = await entries(Buffer.from(await r.arrayBuffer()), format);
      expect(files).toEqual(
        expect.arrayContaining([`${repo.name}-v1.0/hello.txt`, `${repo.name}-v1.0/src/lib.txt`]),
      );
      const missing = await s.anon.get(`/api/v1/repos/${org}/${repo.name}/archive/no-such-rev.${format}`);
      expect(missing.status).toBe(404);
    },
  );
});
