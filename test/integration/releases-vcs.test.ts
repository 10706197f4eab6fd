/**
 * Releases on all three kinds: a tag pushed with the stock client is found; a release with
 * `target_commitish` creates its tag through the one repository-change path (the `tag` event is
 * recorded like a pushed tag's; Mercurial commits `.hgtags`, Fossil adds a tag artifact); source
 * archives stream as tar.gz and zip.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { WorkingCopy } from '../helpers/clients.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { ok, tempDir, withCreds } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

const exec = promisify(execFile);
let s: TestServer;
let owner: TestUser;
let org: string;

beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  org = await s.newOrg(owner);
});
afterAll(async () => {
  await s.close();
});

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
