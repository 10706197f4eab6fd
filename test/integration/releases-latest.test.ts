/**
 * `GET .../releases/latest`: the release published last that is neither a draft nor a
 * prerelease, as releases are created, published, marked and deleted; 404 when there is none;
 * private repositories hidden from strangers.
 */
import { expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer } from '../helpers/factories.ts';
import { pushFirstGitCommit } from '../helpers/vcs.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

/** A git repository with one commit on main; its releases path. */
async function repoWithCommit(opts: { private?: boolean } = {}): Promise<string> {
  const repo = await newRepo(owner, org, { vcs: 'git', isPrivate: opts.private ?? false });
  await pushFirstGitCommit(repo.clone, owner.token);
  return `${repo.api}/releases`;
}

async function create(base: string, tag: string, extra: Record<string, unknown> = {}): Promise<number> {
  const r = await owner.client.post(base, { tag_name: tag, name: tag, target_commitish: 'main', ...extra });
  expect(r.status).toBe(201);
  return r.body.data.id as number;
}

async function latestTag(base: string, client = s.anon): Promise<string | number> {
  const r = await client.get(`${base}/latest`);
  if (r.status !== 200) return r.status;
  return r.body.data.tag_name as string;
}

test('the latest release is the one published last that is neither a draft nor a prerelease', async () => {
  const base = await repoWithCommit();
  const none = await s.anon.get(`${base}/latest`);
  expect(none.status).toBe(404);
  expect(none.body.error).toEqual({ code: 'not_found', message: 'release not found' });

  await create(base, 'v1.0');
  const r = await s.anon.get(`${base}/latest`);
  expect(r.status).toBe(200);
  expect(r.body.data).toMatchObject({ tag_name: 'v1.0', draft: false, prerelease: false, assets: [] });
  expect(r.body.data.published_at).toEqual(expect.any(String));

  // a prerelease and a draft created later do not count, for members either
  const pre = await create(base, 'v2.0-rc1', { prerelease: true });
  const draft = await create(base, 'v3.0', { draft: true });
  expect(await latestTag(base)).toBe('v1.0');
  expect(await latestTag(base, owner.client)).toBe('v1.0');

  // the order is the publication's, not the version's
  const older = await create(base, 'v1.1');
  expect(await latestTag(base)).toBe('v1.1');

  // publishing the draft makes it the latest; marking it a prerelease takes it back out
  expect((await owner.client.patch(`${base}/${draft}`, { draft: false })).status).toBe(200);
  expect(await latestTag(base)).toBe('v3.0');
  expect((await owner.client.patch(`${base}/${draft}`, { prerelease: true })).status).toBe(200);
  expect(await latestTag(base)).toBe('v1.1');

  // a prerelease made a full release counts by the time it was first published
  expect((await owner.client.patch(`${base}/${pre}`, { prerelease: false })).status).toBe(200);
  expect(await latestTag(base)).toBe('v1.1');

  // deleting the latest falls back to the one before
  expect((await owner.client.delete(`${base}/${older}`)).status).toBe(204);
  expect(await latestTag(base)).toBe('v2.0-rc1');
});

test('a private repository: 404 to strangers, the latest release to members', async () => {
  const base = await repoWithCommit({ private: true });
  await create(base, 'v1.0');
  const outsider = await s.newUser();
  for (const client of [s.anon, outsider.client]) {
    const r = await client.get(`${base}/latest`);
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
  }
  expect(await latestTag(base, owner.client)).toBe('v1.0');
});
