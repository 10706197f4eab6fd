/**
 * Cluster-wide gauges (counts read from the shared database) come from one replica only, and the
 * outbox and webhook lag gauges show a delivery that keeps failing.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { freePort } from '../../src/db/database.ts';
import { ClusterLease } from '../../src/telemetry/cluster-lease.ts';
import { pino } from 'pino';
import { startServer, type Running } from '../../src/server.ts';
import { sample } from '../helpers/metrics.ts';
import { Client, startTestServer, uniq, type TestServer } from '../helpers/server.ts';

const CLUSTER_GAUGES = [
  'triad_ci_pipelines_pending',
  'triad_ci_pipelines_running',
  'triad_webhook_jobs_queued',
  'triad_webhook_delivery_lag_seconds',
  'triad_outbox_lag_seconds',
];
// a failed delivery waits an hour for its retry: its lag keeps growing meanwhile
const ENV = { TRIAD_WEBHOOK_ALLOWED_HOSTS: '*', TRIAD_WEBHOOK_RETRY_SCHEDULE: '1h' };

let a: TestServer;
let b: { running: Running; client: Client; closed: boolean };
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  a = await startTestServer(ENV);
  closers.push(() => a.close());
  // a second server on the same database
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-replica-'));
  const running = await startServer(
    loadConfig({
      DATABASE_URL: a.dbUrl,
      PORT: '0',
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: dataDir,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'silent',
      TRIAD_LOG_REQUESTS: 'false',
      ...ENV,
    }),
  );
  b = { running, client: new Client(running.url, a.adminToken), closed: false };
  closers.push(async () => {
    if (!b.closed) await running.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  });
});
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
});

async function scrape(c: Client): Promise<string> {
  const r = await c.get('/metrics');
  expect(r.status).toBe(200);
  return r.text;
}

/** Which of the two servers showed every cluster gauge (and neither shows some only). */
function exporters(texts: string[]): number[] {
  return texts.flatMap((t, i) => {
    const shown = CLUSTER_GAUGES.filter((g) => sample(t, g) !== undefined);
    if (shown.length !== 0 && shown.length !== CLUSTER_GAUGES.length)
      throw new Error(`partial: ${shown.join(', ')}`);
    return shown.length === CLUSTER_GAUGES.length ? [i] : [];
  });
}

describe('cluster-wide gauges', () => {
  test('when two servers share one database, then the cluster gauges come from one of them, always the same', async () => {
    const first = exporters([await scrape(a.anon), await scrape(b.client)]);
    expect(first).toHaveLength(1);
    for (let i = 0; i < 3; i++) {
      // scraped at once too
      const both = await Promise.all([scrape(a.anon), scrape(b.client)]);
      expect(exporters(both)).toEqual(first);
      // while each server shows its own metrics
      for (const t of both) expect(sample(t, 'triad_db_pool_connections_max', { pool: 'main' })).toBe(20);
    }
  });

  test('when a webhook receiver is dead, then the delivery lag grows, and the outbox has none', async () => {
    const org = uniq('o');
    const repo = uniq('r');
    expect((await a.admin.post('/api/v1/orgs', { name: org })).status).toBe(201);
    expect((await a.admin.post(`/api/v1/orgs/${org}/repos`, { name: repo })).status).toBe(201);
    const hooks = `/api/v1/repos/${org}/${repo}/webhooks`;
    const dead = `http://127.0.0.1:${await freePort()}/hook`;
    const h = await a.admin.post(hooks, { url: dead, events: ['issue.opened'] });
    expect(h.status).toBe(201);
    expect((await a.admin.post(`/api/v1/repos/${org}/${repo}/issues`, { title: 'lag' })).status).toBe(201);
    // the first attempt failed (either server may have made it)
    const deliveries = `${hooks}/${h.body.data.id}/deliveries`;
    for (let tries = 0; ; tries++) {
      const d = await a.admin.get(deliveries);
      if (d.body.data.length > 0) break;
      if (tries > 150) throw new Error('no delivery attempt');
      await new Promise((r) => setTimeout(r, 100));
    }
    const [ta, tb] = await Promise.all([scrape(a.anon), scrape(b.client)]);
    const failures = [ta, tb].map(
      (t) => sample(t, 'triad_webhook_deliveries_total', { result: 'failure' }) ?? 0,
    );
    expect(failures[0]! + failures[1]!).toBe(1);
    const lead = sample(ta, 'triad_webhook_delivery_lag_seconds') === undefined ? b.client : a.anon;
    const before = await scrape(lead);
    expect(sample(before, 'triad_webhook_jobs_queued')).toBe(1);
    expect(sample(before, 'triad_outbox_lag_seconds')).toBe(0);
    const lag1 = sample(before, 'triad_webhook_delivery_lag_seconds') ?? 0;
    expect(lag1).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 300));
    const lag2 = sample(await scrape(lead), 'triad_webhook_delivery_lag_seconds') ?? 0;
    expect(lag2).toBeGreaterThan(lag1);
  });

  test('when the exporting server stops, then the other one exports the cluster gauges from its next scrape', async () => {
    const [ta] = await Promise.all([scrape(a.anon), scrape(b.client)]);
    const aLeads = exporters([ta]).length === 1;
    const stay = aLeads ? b.client : a.anon;
    if (aLeads) await a.close();
    else {
      await b.running.close();
      b.closed = true;
    }
    const text = await scrape(stay);
    expect(exporters([text])).toEqual([0]);
    expect(sample(text, 'triad_webhook_jobs_queued')).toBe(1);
  });

  test('when scrapes come further apart than the lease lasts, then its holder keeps it between them', async () => {
    // two contenders on the running server's own connection pool
    const orm = a.running.orm;
    const log = pino({ level: 'silent' });
    const lease = (n: string) => new ClusterLease({ em: () => orm.em, log, name: n, seconds: 4 });
    const name = uniq('lease');
    const [one, two] = [lease(name), lease(name)];
    /** Each step bounded, so a stuck one names itself. */
    const within = <T>(what: string, p: Promise<T>): Promise<T> =>
      Promise.race([
        p,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`${what}: no answer in 10 s`)), 10_000),
        ),
      ]);
    try {
      expect(await within('the first take', one.holds())).toBe(true);
      // past the lease's length, with no scrape of the holder in between (renewed every 1.3 s: a
      // lease of 2 s left a loaded machine too little room for a renewal)
      await new Promise((r) => setTimeout(r, 5_000));
      expect(await within('the contender', two.holds())).toBe(false);
      await within('the release', one.release());
      expect(await within('the take after the release', two.holds())).toBe(true);
    } finally {
      await one.release();
      await two.release();
    }
  }, 45_000);
});
