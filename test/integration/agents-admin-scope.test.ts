/**
 * The `agents:admin` scope (DESIGN.md section 11): a site administrator's token with it registers,
 * lists and deregisters agents and reads the queue figures (what the AgentPool operator does) and
 * nothing else; `TRIAD_OPERATOR_TOKEN` is such a token, ensured at start.
 */
import { describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/server.ts';
import {
  Client as ApiClient,
  startTestServer,
  uniq,
  type Client,
  type TestServer,
  type TestUser,
} from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';

const operatorToken = `op_${randomBytes(12).toString('hex')}`;
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ TRIAD_OPERATOR_TOKEN: operatorToken }, (w) => ({ s, owner, org } = w));

/** What the operator does with `c`: register, list, queue, deregister; returns the statuses. */
async function operatorCalls(c: Client, headers: Record<string, string> = {}): Promise<number[]> {
  const name = uniq('agentpool');
  const made = await c.post('/api/v1/admin/agents', { name }, headers);
  const list = await c.get('/api/v1/admin/agents', headers);
  const listed = list.status === 200 && list.body.data.some((a: { name: string }) => a.name === name);
  const queue = await c.get('/api/v1/ci/queue?labels=', headers);
  const gone =
    made.status === 201
      ? (await c.request('DELETE', `/api/v1/admin/agents/${made.body.data.id}`, undefined, headers)).status
      : 0;
  return [made.status, listed ? list.status : -1, queue.status, gone];
}

describe('the agents:admin scope', () => {
  test('when the operator token (TRIAD_OPERATOR_TOKEN) is used, then it registers, lists and deregisters agents and reads the queue, in both API variants', async () => {
    const op = s.anon.as(operatorToken);
    expect(await operatorCalls(op)).toEqual([201, 200, 200, 204]);
    expect(await operatorCalls(op, { 'X-Svc-Api-Variant': 'earlier' })).toEqual([201, 200, 200, 204]);
    // the agent it registered has a working agent token
    const made = await op.post('/api/v1/admin/agents', { name: uniq('agent') });
    expect((await s.anon.as(made.body.data.token).post('/api/v1/ci/poll')).status).toBe(204);
  });

  test('when the operator token asks for anything else, then it is refused with 403', async () => {
    const op = s.anon.as(operatorToken);
    const refused = [
      await op.post('/api/v1/orgs', { name: uniq('org') }),
      await op.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo'), vcs: 'git' }),
      await op.post('/api/v1/admin/users', { username: uniq('u'), email: `${uniq('u')}@example.test` }),
      await op.post('/api/v1/orgs', { name: uniq('org') }, { 'X-Svc-Api-Variant': 'earlier' }),
    ];
    for (const r of refused) {
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('forbidden');
    }
    // and a token it mints cannot reach further than agents:admin
    const minted = await op.post('/api/v1/user/tokens', { name: 'wider', scopes: ['repo:write'] });
    expect(minted.status).toBe(403);
  });

  test('when a site administrator makes a token with only agents:admin, then it administers agents; a non-admin user with it, or an admin token without it, cannot', async () => {
    const made = await s.admin.post('/api/v1/user/tokens', { name: 'operator', scopes: ['agents:admin'] });
    expect(made.status).toBe(201);
    expect(made.body.data.scopes).toEqual(['agents:admin']);
    expect(await operatorCalls(s.anon.as(made.body.data.token))).toEqual([201, 200, 200, 204]);

    const plain = await s.newUser(undefined, { scopes: ['agents:admin'] });
    const r = await plain.client.post('/api/v1/admin/agents', { name: uniq('agent') });
    expect(r.status).toBe(403);
    expect((await plain.client.get('/api/v1/ci/queue?labels=')).status).toBe(403);

    const admin = await s.newUser(undefined, { admin: true, scopes: ['repo:write', 'ci:write'] });
    expect((await admin.client.get('/api/v1/admin/agents')).status).toBe(403);
    // the owner's token holds every scope, agents:admin too, but the owner is no site administrator
    expect((await owner.client.get('/api/v1/admin/agents')).status).toBe(403);
  });
});

describe('TRIAD_OPERATOR_TOKEN without the TRIAD_ADMIN_* variables', () => {
  test('when the server starts, then the token belongs to the administrator `admin` and administers agents only', async () => {
    const token = `op_${randomBytes(12).toString('hex')}`;
    // blank values count as unset
    const t = await startTestServer({
      TRIAD_ADMIN_USERNAME: '',
      TRIAD_ADMIN_TOKEN: '',
      TRIAD_OPERATOR_TOKEN: token,
    });
    try {
      const op = t.anon.as(token);
      expect(await operatorCalls(op)).toEqual([201, 200, 200, 204]);
      expect((await op.get('/api/v1/user')).body.data).toMatchObject({ username: 'admin', is_admin: true });
      expect((await op.post('/api/v1/orgs', { name: uniq('org') })).status).toBe(403);
    } finally {
      await t.close();
    }
  });

  test('when a user merely named `admin` exists, then a restart gives the token to the first site administrator and promotes nobody', async () => {
    const first = await startTestServer();
    await first.newUser('admin');
    await first.close();
    const token = `op_${randomBytes(12).toString('hex')}`;
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-test-data-'));
    const config = loadConfig({
      DATABASE_URL: first.dbUrl,
      PORT: '0',
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: dataDir,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'silent',
      TRIAD_OPERATOR_TOKEN: token,
    });
    const again = await startServer(config);
    try {
      const op = new ApiClient(again.url).as(token);
      expect((await op.get('/api/v1/user')).body.data).toMatchObject({ username: 'root', is_admin: true });
      const seen = await new ApiClient(again.url).as(first.adminToken).get('/api/v1/admin/users/admin');
      expect(seen.body.data).toMatchObject({ username: 'admin', is_admin: false });
      expect(await operatorCalls(op)).toEqual([201, 200, 200, 204]);
    } finally {
      await again.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
