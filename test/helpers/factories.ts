/**
 * What test files create through the API before they test something: a server with an owner and
 * an organization, members, repositories; and the shape of an error answer.
 */
import path from 'node:path';
import { afterAll, beforeAll, expect } from '@jest/globals';
import type { VcsKind } from '../../src/vcs/index.ts';
import { startTestServer, uniq, type Client, type Res, type TestServer, type TestUser } from './server.ts';
import { tempDir } from './vcs.ts';

/** The API's error body: `{ error: { code, message } }` with the given status. */
export function expectError(r: Res, status: number, code: string): void {
  expect(r.status).toBe(status);
  expect(r.body).toEqual({ error: { code, message: expect.any(String) } });
}

export type OrgServer = { s: TestServer; owner: TestUser; org: string };

/** A test server (see startTestServer) with a user who owns a new organization. */
export async function serverWithOrg(env: Record<string, string> = {}): Promise<OrgServer> {
  const s = await startTestServer(env);
  const owner = await s.newUser();
  return { s, owner, org: await s.newOrg(owner) };
}

export type SpoolServer = OrgServer & { spool: string };

/**
 * A serverWithOrg whose transport spool (`TRIAD_TRANSPORT_SPOOL_DIR`) is a new temporary
 * directory of its own, `spool`, so that a test can see what is left in it.
 */
export async function serverWithSpool(
  env: Record<string, string> = {},
): Promise<OrgServer & { spool: string }> {
  const spool = await tempDir('triad-spool-test-');
  return { spool, ...(await serverWithOrg({ TRIAD_TRANSPORT_SPOOL_DIR: spool, ...env })) };
}

/** A client holding a new token that `user` minted with `body` (under a unique name). */
export async function mintedClient(
  s: TestServer,
  user: TestUser,
  body: Record<string, unknown>,
): Promise<Client> {
  const r = await user.client.post('/api/v1/user/tokens', { name: uniq('t'), ...body });
  expect(r.status).toBe(201);
  return s.anon.as(r.body.data.token);
}

/** A new organization of a new owner, with a new member. */
export async function newTeam(s: TestServer): Promise<{ owner: TestUser; member: TestUser; org: string }> {
  const owner = await s.newUser();
  const member = await s.newUser();
  const org = await s.newOrg(owner);
  await s.addMember(org, member);
  return { owner, member, org };
}

export type NewRepo = {
  name: string;
  id: number;
  vcs: VcsKind;
  clone: string;
  /** `/api/v1/repos/ORG/NAME` */
  api: string;
  /** The created repository as the API answered it. */
  data: any;
};

/**
 * A repository created by `by` in `org` (named `name`, else a unique name); `vcs` and `isPrivate`
 * are sent only when given, so the server's defaults apply otherwise.
 */
export async function newRepo(
  by: TestUser | Client,
  org: string,
  opts: { vcs?: VcsKind; isPrivate?: boolean; name?: string } = {},
): Promise<NewRepo> {
  const client = 'client' in by ? by.client : by;
  const name = opts.name ?? uniq(opts.vcs ?? 'repo');
  const body: Record<string, unknown> = { name };
  if (opts.vcs !== undefined) body.vcs = opts.vcs;
  if (opts.isPrivate !== undefined) body.is_private = opts.isPrivate;
  const r = await client.post(`/api/v1/orgs/${org}/repos`, body);
  if (r.status !== 201) throw new Error(`newRepo: ${r.status} ${r.text}`);
  const data = r.body.data;
  return {
    name,
    id: data.id,
    vcs: data.vcs,
    clone: data.clone_url,
    api: `/api/v1/repos/${org}/${name}`,
    data,
  };
}

/** A repository's directory under a server's data directory. */
export function hostedDir(dataDir: string, repo: { id: number; vcs: VcsKind }): string {
  return path.join(dataDir, 'repos', `${repo.id}.${repo.vcs}`);
}

/**
 * A server `start`ed for the enclosing block in a beforeAll (after the block's earlier ones),
 * handed to `use`, and closed in an afterAll.
 */
function withServer<W extends OrgServer>(start: () => Promise<W>, use: (w: W) => void): void {
  let w: W | undefined;
  beforeAll(async () => {
    w = await start();
    use(w);
  });
  afterAll(async () => {
    await w?.s.close();
  });
}

/** A serverWithOrg for the enclosing block (see withServer). */
export function withOrgServer(env: Record<string, string>, use: (w: OrgServer) => void): void {
  withServer(() => serverWithOrg(env), use);
}

/** A serverWithSpool for the enclosing block (see withServer). */
export function withSpoolServer(env: Record<string, string>, use: (w: SpoolServer) => void): void {
  withServer(() => serverWithSpool(env), use);
}
