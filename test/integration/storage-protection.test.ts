/**
 * Protected refs with storage nodes: the rules and the pusher's identity travel with a push from
 * the server to the node holding the repository, whose git refuses what they refuse.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { pushWith, userOn, type Pushed } from '../helpers/serve.ts';
import type { TestUser } from '../helpers/server.ts';
import { startCluster, type Cluster } from '../helpers/storage-cluster.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

let c: Cluster;
let owner: TestUser;
let member: TestUser;
let repo: Pushed;
let work: string;

beforeAll(async () => {
  c = await startCluster({ nodes: 1, servers: 1 });
  const server = c.servers[0]!;
  owner = await userOn(server);
  member = await userOn(server);
  repo = await pushWith(owner, { vcs: 'git' }, (w) => writeFile(w, 'README.md', '# hi\n'));
  const added = await server.admin.put(`/api/v1/orgs/${repo.org}/members/${member.username}`, {
    role: 'member',
  });
  expect(added.status).toBeLessThan(300);
  const rule = { pattern: 'main', fast_forward_only: true, push: { users: [owner.username] } };
  expect((await owner.client.post(`/api/v1/repos/${repo.org}/${repo.name}/protections`, rule)).status).toBe(
    201,
  );
  work = `${await tempDir()}/w`;
  await ok('git', ['clone', '-q', repo.cloneUrl, work], '/');
}, 180_000);

afterAll(async () => {
  await c?.stop();
});

const push = (who: TestUser, ...args: string[]) =>
  sh('git', ['push', withCreds(repo.cloneUrl, who.token), ...args], work);
const remoteMain = async () =>
  (await ok('git', ['ls-remote', repo.cloneUrl, 'refs/heads/main'], work)).split('\t')[0];

describe('protected refs on a storage node', () => {
  test('when a push breaks a rule, then the node refuses it with the reason; an allowed push lands', async () => {
    await ok('git', ['commit', '-q', '--amend', '-m', 'rewritten'], work);
    const forced = await push(owner, '--force', 'main');
    expect(forced.code).not.toBe(0);
    expect(forced.stderr).toContain(
      'branch main is protected by rule "main": only fast-forward updates are allowed',
    );
    expect(await remoteMain()).toBe(repo.head);

    await ok('git', ['reset', '-q', '--hard', repo.head], work);
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'forward'], work);
    const byMember = await push(member, 'main');
    expect(byMember.stderr).toContain(
      `branch main is protected by rule "main": only ${owner.username} may push to it`,
    );
    expect(await remoteMain()).toBe(repo.head);

    expect((await push(owner, 'main')).code).toBe(0);
    expect(await remoteMain()).toBe((await ok('git', ['rev-parse', 'HEAD'], work)).trim());
  });

  test('when a client sends the x-triad-* headers the server gives the node, then the node never sees them', async () => {
    // rules of the client's own making that would refuse everyone
    const fake = Buffer.from(
      JSON.stringify({
        rules: [{ pattern: '**', fast_forward_only: true, allow_deletion: false, push: { users: [] } }],
        pusher: { username: owner.username, role: 'owner' },
      }),
    ).toString('base64url');
    const other = await pushWith(owner, { vcs: 'git' }, (w) => writeFile(w, 'README.md', '# other\n'));
    const w = `${await tempDir()}/o`;
    await ok('git', ['clone', '-q', other.cloneUrl, w], '/');
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'next'], w);
    const r = await sh(
      'git',
      [
        '-c',
        `http.extraHeader=x-triad-protection: ${fake}`,
        'push',
        withCreds(other.cloneUrl, owner.token),
        'main',
      ],
      w,
    );
    expect([r.code, r.stderr]).toEqual([0, expect.not.stringContaining('protected')]);
  });
});
