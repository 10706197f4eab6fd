import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, withOrgServer } from '../helpers/factories.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { ok } from '../helpers/vcs.ts';

/** Merges and `delete_source` obey the protection rules a push obeys (git). */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

let member: TestUser;
let repo: PrRepo;

const heads = async () => (await ok('git', ['ls-remote', '--heads', repo.w.url], repo.w.dir)).trim();

async function open(source: string): Promise<number> {
  const r = await owner.client.post(`${repo.api}/pulls`, { title: source, source_ref: source });
  expect(r.status).toBe(201);
  return r.body.data.number;
}

beforeAll(async () => {
  member = await s.newUser();
  await s.addMember(org, member);
  repo = await PrRepo.create(owner, org, 'git');
  for (const rule of [
    { pattern: 'main', push: 'owners' },
    { pattern: 'keep/*', push: 'members', allow_deletion: false },
    { pattern: 'scratch/**', push: 'members', allow_deletion: true },
  ])
    expect((await owner.client.post(`${repo.api}/protections`, rule)).status).toBe(201);
});

describe('merges into protected branches', () => {
  test('when a member who may not push to main merges into it, then 403 names the rule and nothing changes', async () => {
    await repo.commitOn('feature', { 'f.txt': 'f\n' }, 'feature');
    const number = await open('feature');
    const before = await heads();
    const r = await member.client.post(`${repo.api}/pulls/${number}/merge`, { style: 'merge' });
    expectError(r, 403, 'forbidden');
    expect(r.body.error.message).toContain(
      'branch main is protected by rule "main": only organization owners may push to it',
    );
    expect(await heads()).toBe(before);
    expect((await owner.client.get(`${repo.api}/pulls/${number}`)).body.data.status).toBe('open');
    // a merge commit moves main forward: fast_forward_only (the default) lets the owner merge it
    const merged = await owner.client.post(`${repo.api}/pulls/${number}/merge`, { style: 'merge' });
    expect(merged.status).toBe(200);
    expect(merged.body.data.status).toBe('merged');
  });

  test('when delete_source names a branch whose rule refuses deletion, then the merge lands and the source stays', async () => {
    await repo.commitOn('keep/one', { 'k.txt': 'k\n' }, 'keep');
    const number = await open('keep/one');
    const r = await owner.client.post(`${repo.api}/pulls/${number}/merge`, {
      style: 'merge',
      delete_source: true,
    });
    expect(r.status).toBe(200);
    expect(await heads()).toContain('refs/heads/keep/one');
  });

  test('when delete_source names a branch a rule protects, even one allowing deletion by push, then the source stays; an unprotected source goes', async () => {
    await repo.commitOn('scratch/a/b', { 's.txt': 's\n' }, 'scratch');
    const kept = await open('scratch/a/b');
    const k = await owner.client.post(`${repo.api}/pulls/${kept}/merge`, {
      style: 'squash',
      delete_source: true,
    });
    expect(k.status).toBe(200);
    expect(await heads()).toContain('refs/heads/scratch/a/b');
    await repo.commitOn('loose', { 'l.txt': 'l\n' }, 'loose');
    const number = await open('loose');
    const r = await owner.client.post(`${repo.api}/pulls/${number}/merge`, {
      style: 'squash',
      delete_source: true,
    });
    expect(r.status).toBe(200);
    expect(await heads()).not.toContain('refs/heads/loose');
  });
});
