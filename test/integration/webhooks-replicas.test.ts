import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { freePort } from '../../src/db/database.ts';
import { startServer, type Running } from '../../src/server.ts';
import { Client, freshDatabase, startTestServer, uniq, type TestServer } from '../helpers/server.ts';
import { Processes, waitReady } from '../helpers/process.ts';
import { Receiver } from '../helpers/receiver.ts';

const procs = new Processes();
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await procs.cleanup();
  for (const c of closers.reverse()) await c().catch(() => undefined);
});

async function receiver(): Promise<Receiver> {
  const r = await Receiver.start('replica-secret');
  closers.push(() => r.close());
  return r;
}

/** A second server on the database of `s` (its own pool, LISTEN connection and dispatcher). */
async function replica(
  s: TestServer,
  env: Record<string, string>,
): Promise<{ running: Running; client: Client }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-replica-'));
  const running = await startServer(
    loadConfig({
      DATABASE_URL: s.dbUrl,
      PORT: '0',
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: dataDir,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'silent',
      TRIAD_LOG_REQUESTS: 'false',
      ...env,
    }),
  );
  closers.push(async () => {
    await running.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });
  return { running, client: new Client(running.url, s.adminToken) };
}

async function setup(client: Client, url: string, events: string[]) {
  const org = uniq('o');
  const repo = uniq('r');
  expect((await client.post('/api/v1/orgs', { name: org })).status).toBe(201);
  expect((await client.post(`/api/v1/orgs/${org}/repos`, { name: repo })).status).toBe(201);
  const hooks = `/api/v1/repos/${org}/${repo}/webhooks`;
  const h = await client.post(hooks, { url, secret: 'replica-secret', events });
  expect(h.status).toBe(201);
  return {
    issues: `/api/v1/repos/${org}/${repo}/issues`,
    deliveries: `${hooks}/${h.body.data.id}/deliveries`,
  };
}

describe('replicas', () => {
  test('when two servers share one database, then each event is delivered exactly once', async () => {
    const env = { TRIAD_WEBHOOK_ALLOWED_HOSTS: '*', TRIAD_WEBHOOK_CONCURRENCY: '4' };
    const a = await startTestServer(env);
    closers.push(() => a.close());
    const b = await replica(a, env);
    const rx = await receiver();
    rx.answer = () => ({ delayMs: 15 });
    const { issues } = await setup(a.admin, rx.url(), ['issue.opened', 'issue.commented']);
    const n = 30;
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        (i % 2 === 0 ? a.admin : b.client).post(issues, { title: `t${i}` }),
      ),
    );
    const got = await rx.waitFor(n);
    expect(await rx.quiet(1500)).toBe(0);
    expect(got).toHaveLength(n);
    expect(new Set(got.map((r) => r.delivery)).size).toBe(n);
    expect(got.map((r) => r.body.payload.issue.title).sort()).toEqual(
      Array.from({ length: n }, (_, i) => `t${i}`).sort(),
    );
    expect(got.every((r) => r.attempt === 1 && r.svcValid === true && r.standardValid === true)).toBe(true);
    // Both dispatchers took part (each counts its own attempts).
    const sent = async (base: string) => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return Number(/triad_webhook_deliveries_total\{result="success"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const [fromA, fromB] = await Promise.all([sent(a.url), sent(b.running.url)]);
    expect(fromA + fromB).toBe(n);
    expect(Math.min(fromA, fromB)).toBeGreaterThan(0);
  });

  test('when a server whose policy refuses loopback delivers, then the attempt is recorded as blocked and nothing is sent', async () => {
    const a = await startTestServer({ TRIAD_WEBHOOK_ALLOWED_HOSTS: '*' });
    closers.push(() => a.close());
    const rx = await receiver();
    const { issues, deliveries } = await setup(a.admin, rx.url(), ['issue.opened']);
    // The webhook was accepted by a permissive server; it stops, and a strict one takes over.
    await a.running.close();
    const strict = await replica(a, { TRIAD_WEBHOOK_RETRY_SCHEDULE: 'none' });
    expect((await strict.client.post(issues, { title: 'to loopback' })).status).toBe(201);
    const end = Date.now() + 10_000;
    let list: any[] = [];
    while (list.length === 0 && Date.now() < end) {
      list = (await strict.client.get(deliveries)).body.data;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ success: false, response_code: 0, attempt: 1 });
    expect(list[0].error).toMatch(/^blocked address: 127\.0\.0\.1 is in 127\.0\.0\.0\/8 \(loopback\)/);
    expect(rx.requests).toHaveLength(0);
  });
});

describe('a server killed mid-delivery', () => {
  test('when the process dies while the receiver holds the request, then after a restart the delivery is sent again with the same id and the interrupted attempt is recorded', async () => {
    const dbUrl = await freshDatabase();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = {
      DATABASE_URL: dbUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: await procs.tempDir(),
      TRIAD_ADMIN_TOKEN: 'kill-t0k',
      TRIAD_EMBEDDED_AGENT: 'off',
      TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
      TRIAD_WEBHOOK_TIMEOUT: '5s',
      LOG_LEVEL: 'warn',
    };
    const rx = await receiver();
    rx.answer = (_r, i) => (i === 0 ? { hold: true } : {});
    const first = procs.serve(env);
    await waitReady(first, url);
    const admin = new Client(url, 'kill-t0k');
    const { issues, deliveries } = await setup(admin, rx.url(), ['issue.opened']);
    expect((await admin.post(issues, { title: 'survives' })).status).toBe(201);
    const [held] = await rx.waitFor(1);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    const second = procs.serve(env);
    await waitReady(second, url);
    const [, again] = await rx.waitFor(2, () => true, 45_000);
    expect(again!.delivery).toBe(held!.delivery);
    expect(again!.attempt).toBe(2);
    expect(again!.raw.equals(held!.raw)).toBe(true);
    expect(again!.svcValid).toBe(true);
    let list: any[] = [];
    for (let i = 0; i < 50 && list.length < 2; i++) {
      list = (await admin.get(deliveries)).body.data;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(list.map((d) => [d.attempt, d.success, d.delivery_id])).toEqual([
      [2, true, held!.delivery],
      [1, false, held!.delivery],
    ]);
    expect(list[1].error).toMatch(/^interrupted/);
    // The restarted dispatcher found the job by its due time, not by a failing pass and a retry.
    expect(second.output()).not.toContain('webhook dispatcher pass failed');
    second.child.kill('SIGTERM');
  }, 90_000);
});
