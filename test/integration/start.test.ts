import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { freePort } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { startServer, type Running } from '../../src/server.ts';
import { Client, freshDatabase, uniq } from '../helpers/server.ts';
import { exited, Processes, stderrMatch, stop, waitReady } from '../helpers/process.ts';

const procs = new Processes();
const runnings = new Set<Running>();
const databases: string[] = [];

afterAll(async () => {
  await procs.cleanup();
  await Promise.all([...runnings].map((r) => r.close()));
  const base = process.env.TRIAD_TEST_PG;
  if (base !== undefined && databases.length > 0) {
    const c = new pg.Client({ connectionString: `${base}/postgres` });
    await c.connect();
    for (const db of databases) await c.query(`drop database if exists ${db} with (force)`);
    await c.end();
  }
});

const tempDir = () => procs.tempDir();
const serve = (env: Record<string, string>) => procs.serve(env);
const runCli = (args: string[], env: Record<string, string>) => procs.runCli(args, env);

describe('triad serve, the real process', () => {
  test('when started with an empty data dir, then it becomes ready, serves the API, drains on SIGTERM with exit 0, and keeps its data across restarts', async () => {
    const dataDir = await tempDir();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = { PORT: String(port), TRIAD_DATA_DIR: dataDir, TRIAD_ADMIN_TOKEN: 't0k', LOG_LEVEL: 'info' };
    const anon = new Client(url);
    const admin = anon.as('t0k');

    const first = serve(env);
    await waitReady(first, url);

    const noToken = await anon.get('/api/v1/user');
    expect(noToken.status).toBe(401);
    expect(noToken.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
    const me = await admin.get('/api/v1/user');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ username: 'admin', is_admin: true });
    const org = uniq('kept');
    expect((await admin.post('/api/v1/orgs', { name: org, description: 'survives restarts' })).status).toBe(
      201,
    );
    // LOG_LEVEL=info: JSON lines on stdout, including the listening message.
    expect(first.output()).toMatch(/"msg":"Triad listening on http:\/\/localhost:\d+"/);

    expect(await stop(first)).toEqual({ code: 0, signal: null });
    expect(first.output()).toContain('shutdown complete');
    expect((await fetch(`${url}/healthz`).catch(() => undefined))?.status).toBeUndefined();

    const second = serve(env);
    await waitReady(second, url);
    const kept = await anon.get(`/api/v1/orgs/${org}`);
    expect(kept.status).toBe(200);
    expect(kept.body.data).toMatchObject({ name: org, description: 'survives restarts' });
    expect((await admin.get('/api/v1/user')).body.data.id).toBe(me.body.data.id);
    // The bootstrap token is ensured, not duplicated, on every start.
    const tokens = await admin.get('/api/v1/user/tokens');
    expect(tokens.body.data).toHaveLength(1);
    expect(await stop(second)).toEqual({ code: 0, signal: null });
  }, 240_000);
});

describe('triad serve, failed start', () => {
  test('when the port is taken, then it exits 1 with the reason, leaves no PostgreSQL behind, and a later start works', async () => {
    const dataDir = await tempDir();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '0.0.0.0', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    const env = {
      PORT: String(port),
      TRIAD_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      TRIAD_EMBEDDED_AGENT: 'off',
    };
    try {
      const failed = serve(env);
      const result = await exited(failed.child);
      expect(result).toEqual({ code: 1, signal: null });
      expect(failed.output()).toContain('EADDRINUSE');
      // The one-time administrator token is not spent on a start that fails.
      expect(failed.output()).not.toContain('first start');
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
    // The embedded cluster was stopped: no live postmaster owns the data directory.
    const pidFile = await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').catch(() => '');
    const pid = Number.parseInt(pidFile.split('\n')[0] ?? '', 10);
    if (Number.isInteger(pid) && pid > 0) expect(() => process.kill(pid, 0)).toThrow();

    const again = serve(env);
    await waitReady(again, `http://127.0.0.1:${port}`);
    // (stderr is read asynchronously: the line may arrive after the server answered ready)
    expect((await stderrMatch(again, /first start\. Created the administrator "admin"/))?.[0]).toBeDefined();
    expect(await stop(again)).toEqual({ code: 0, signal: null });
  }, 150_000);
});

describe('triad admin user create', () => {
  test('when --access-token is given, then it prints a token that authenticates against a server on that database', async () => {
    const dbUrl = await freshDatabase();
    const dataDir = await tempDir();
    const username = uniq('cli');
    const env = { DATABASE_URL: dbUrl, TRIAD_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
    const r = await runCli(
      [
        'admin',
        'user',
        'create',
        '--username',
        username,
        '--email',
        `${username}@example.test`,
        '--access-token',
        '--scopes',
        'repo:read',
      ],
      env,
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^created user ${username} \\(id \\d+\\)$`));
    const token = lines[1]!;
    expect(token).toMatch(/^\S{20,}$/);

    const running = await startServer(
      loadConfig({
        DATABASE_URL: dbUrl,
        PORT: '0',
        HOST: '127.0.0.1',
        TRIAD_DATA_DIR: dataDir,
        TRIAD_EMBEDDED_AGENT: 'off',
        LOG_LEVEL: 'silent',
      }),
    );
    runnings.add(running);
    const c = new Client(running.url, token);
    const me = await c.get('/api/v1/user');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ username, email: `${username}@example.test`, is_admin: false });
    const tokens = await c.get('/api/v1/user/tokens');
    expect(tokens.body.data).toEqual([expect.objectContaining({ scopes: ['repo:read'], level: 'personal' })]);

    // Bad arguments fail before anything is written; a taken username fails with exit 1.
    const bad = await runCli(
      [
        'admin',
        'user',
        'create',
        '--username',
        `${username}x`,
        '--email',
        'e@example.test',
        '--access-token',
        '--scopes',
        'nope',
      ],
      env,
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^triad: .*scopes/);
    const q = new pg.Client({ connectionString: dbUrl });
    await q.connect();
    const users = await q.query('select username from users where lower(username) = lower($1)', [
      `${username}x`,
    ]);
    await q.end();
    expect(users.rowCount).toBe(0);
    const taken = await runCli(
      ['admin', 'user', 'create', '--username', username, '--email', 'e@example.test'],
      env,
    );
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain('taken');
    await running.close();
    runnings.delete(running);
  }, 150_000);
});

describe('concurrent starts on one empty database', () => {
  test('when two servers start at once, then both come up and every migration is recorded exactly once', async () => {
    const base = process.env.TRIAD_TEST_PG;
    if (base === undefined) throw new Error('TRIAD_TEST_PG is not set');
    const name = `empty_${randomBytes(6).toString('hex')}`;
    const c = new pg.Client({ connectionString: `${base}/postgres` });
    await c.connect();
    await c.query(`create database ${name}`);
    await c.end();
    databases.push(name);
    const dbUrl = `${base}/${name}`;
    const config = async () =>
      loadConfig({
        DATABASE_URL: dbUrl,
        PORT: '0',
        HOST: '127.0.0.1',
        TRIAD_DATA_DIR: await tempDir(),
        TRIAD_ADMIN_TOKEN: 'both-start-with-this',
        TRIAD_EMBEDDED_AGENT: 'off',
        LOG_LEVEL: 'silent',
      });
    const started = await Promise.allSettled([startServer(await config()), startServer(await config())]);
    for (const r of started) if (r.status === 'fulfilled') runnings.add(r.value);
    const [a, b] = started.map((r) => {
      if (r.status === 'rejected') throw r.reason;
      return r.value;
    }) as [Running, Running];
    for (const r of [a, b]) {
      expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
      const me = await new Client(r.url, 'both-start-with-this').get('/api/v1/user');
      expect(me.status).toBe(200);
      expect(me.body.data.username).toBe('admin');
    }
    const q = new pg.Client({ connectionString: dbUrl });
    await q.connect();
    try {
      const rows = await q.query<{ name: string; n: string }>(
        'select name, count(*) as n from triad_migrations group by name order by name',
      );
      expect(rows.rows).toEqual(migrations.map((m) => ({ name: m.name, n: '1' })));
      const admins = await q.query(`select id from users where username = 'admin'`);
      expect(admins.rowCount).toBe(1);
    } finally {
      await q.end();
    }
    await Promise.all([a.close(), b.close()]);
    runnings.delete(a);
    runnings.delete(b);
  }, 150_000);
});
