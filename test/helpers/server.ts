import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { startServer, type Running, type StartOptions } from '../../src/server.ts';
import { CURRENT_SCOPES } from '../../src/domain/access.ts';

export type Res<T = any> = { status: number; body: T; headers: Headers; text: string };

/** A small HTTP client that never throws on error statuses. */
export class Client {
  readonly base: string;
  readonly token: string | undefined;

  constructor(base: string, token?: string) {
    this.base = base;
    this.token = token;
  }

  as(token: string | undefined): Client {
    return new Client(this.base, token);
  }

  async request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Res<T>> {
    const h: Record<string, string> = { ...headers };
    if (this.token !== undefined) h.authorization = `Bearer ${this.token}`;
    let payload: string | Buffer | undefined;
    if (typeof body === 'string' || Buffer.isBuffer(body)) payload = body;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      h['content-type'] ??= 'application/json';
    }
    const r = await fetch(`${this.base}${path}`, { method, headers: h, body: payload });
    const text = await r.text();
    let parsed: unknown = undefined;
    if ((r.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
    return { status: r.status, body: parsed as T, headers: r.headers, text };
  }

  get<T = any>(p: string, headers?: Record<string, string>) {
    return this.request<T>('GET', p, undefined, headers);
  }
  post<T = any>(p: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', p, body, headers);
  }
  put<T = any>(p: string, body?: unknown) {
    return this.request<T>('PUT', p, body);
  }
  patch<T = any>(p: string, body?: unknown) {
    return this.request<T>('PATCH', p, body);
  }
  delete<T = any>(p: string) {
    return this.request<T>('DELETE', p);
  }
}

export type TestServer = {
  url: string;
  running: Running;
  dataDir: string;
  dbUrl: string;
  adminToken: string;
  /** Anonymous client. */
  anon: Client;
  admin: Client;
  close: () => Promise<void>;
  newUser: (username?: string, opts?: { admin?: boolean; scopes?: string[] }) => Promise<TestUser>;
  newOrg: (owner: TestUser, name?: string) => Promise<string>;
  addMember: (org: string, user: TestUser, role?: 'owner' | 'member') => Promise<void>;
};
export type TestUser = { id: number; username: string; token: string; client: Client };

let seq = 0;
export function uniq(prefix: string): string {
  seq += 1;
  return `${prefix}${seq}${randomBytes(3).toString('hex')}`;
}

/** Creates a fresh database from the migrated template for one test file. */
export async function freshDatabase(): Promise<string> {
  const base = process.env.TRIAD_TEST_PG;
  if (base === undefined) throw new Error('TRIAD_TEST_PG is not set: run through jest (globalSetup)');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const c = new pg.Client({ connectionString: `${base}/postgres` });
  await c.connect();
  await c.query(`create database ${name} template triad_template`);
  await c.end();
  return `${base}/${name}`;
}

/** `start`: what `startServer` gets beyond the configuration (a logger a test reads, …). */
export async function startTestServer(
  env: Record<string, string> = {},
  start: StartOptions = {},
): Promise<TestServer> {
  const dbUrl = await freshDatabase();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-test-data-'));
  const adminToken = `adm_${randomBytes(12).toString('hex')}`;
  const config = loadConfig({
    DATABASE_URL: dbUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    TRIAD_DATA_DIR: dataDir,
    TRIAD_ADMIN_USERNAME: 'root',
    TRIAD_ADMIN_TOKEN: adminToken,
    TRIAD_EMBEDDED_AGENT: 'off',
    LOG_LEVEL: 'silent',
    TRIAD_LOG_REQUESTS: 'false',
    // spooled bodies and CGI scripts go with the data directory, which close() removes
    TRIAD_TRANSPORT_SPOOL_DIR: path.join(dataDir, 'spool'),
    // In-process servers share the test runner's heap: the idle collection (test/unit/idle-gc)
    // would collect all of it; servers started as processes keep the default.
    TRIAD_IDLE_GC_SECONDS: '0',
    // The suite's own processes (jest workers, clients) run at the default priority: backends
    // lowered below them would wait on a busy machine for what they serve to the very tests
    // waiting on them. backend-priority.test.ts sets a niceness and checks it.
    TRIAD_BACKEND_NICE: '0',
    ...env,
  });
  const running = await startServer(config, start);
  const anon = new Client(running.url);
  const admin = anon.as(adminToken);
  const ts: TestServer = {
    url: running.url,
    running,
    dataDir,
    dbUrl,
    adminToken,
    anon,
    admin,
    close: async () => {
      await running.close();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
    newUser: async (username = uniq('user'), opts = {}) => {
      const u = await admin.post('/api/v1/admin/users', {
        username,
        email: `${username}@example.test`,
        display_name: `${username} Display`,
        is_admin: opts.admin ?? false,
      });
      if (u.status !== 201) throw new Error(`newUser: ${u.status} ${u.text}`);
      // (in the current variant's names, whatever the server's default variant)
      const t = await admin.post(
        `/api/v1/admin/users/${username}/tokens`,
        { name: 'test', scopes: opts.scopes ?? [...CURRENT_SCOPES] },
        { 'X-Svc-Api-Variant': 'current' },
      );
      if (t.status !== 201) throw new Error(`newUser token: ${t.status} ${t.text}`);
      return { id: u.body.data.id, username, token: t.body.data.token, client: anon.as(t.body.data.token) };
    },
    newOrg: async (owner, name = uniq('org')) => {
      const r = await owner.client.post('/api/v1/orgs', { name, description: `${name} description` });
      if (r.status !== 201) throw new Error(`newOrg: ${r.status} ${r.text}`);
      return name;
    },
    addMember: async (org, user, role = 'member') => {
      const r = await admin.put(`/api/v1/orgs/${org}/members/${user.username}`, { role });
      if (r.status !== 200) throw new Error(`addMember: ${r.status} ${r.text}`);
    },
  };
  return ts;
}
