import { expect } from '@jest/globals';
import { uniq, type Client, type TestServer, type TestUser } from './server.ts';

export type Reach = {
  /** Another repository of `org` (made by `owner`). */
  otherRepo: string;
  /** An organization `member` owns. */
  otherOrg: string;
  /** A client with a new token of `member` (`POST /api/v1/user/tokens` with `body`). */
  mint: (body: Record<string, unknown>) => Promise<Client>;
  /** Tokens of `member` with `scopes` whose level stops short of `org`'s repositories but one. */
  elsewhere: (scopes: string[]) => Promise<Client[]>;
};

/**
 * What a member's tokens may not reach: a repo-level token of another repository of `org`, an
 * org-level token of another organization.
 */
export async function reachFixture(
  s: TestServer,
  owner: TestUser,
  member: TestUser,
  org: string,
): Promise<Reach> {
  const otherRepo = uniq('other');
  expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: otherRepo, vcs: 'git' })).status).toBe(
    201,
  );
  const otherOrg = await s.newOrg(member);
  const mint = async (body: Record<string, unknown>): Promise<Client> => {
    const r = await member.client.post('/api/v1/user/tokens', { name: uniq('t'), ...body });
    expect(r.status).toBe(201);
    return s.anon.as(r.body.data.token);
  };
  const elsewhere = async (scopes: string[]) => [
    await mint({ scopes, level: 'repo', target: `${org}/${otherRepo}` }),
    await mint({ scopes, level: 'org', target: otherOrg }),
  ];
  return { otherRepo, otherOrg, mint, elsewhere };
}
