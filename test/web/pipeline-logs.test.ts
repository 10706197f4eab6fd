/**
 * The step log viewer on the real server, in Chromium: a signed-in member watches a running
 * step's log arrive live; the server process is killed mid-stream (SIGKILL) and started again on
 * its port; the page resumes by itself, and once the step is done the text it shows equals the
 * stored log line for line (the web's raw download, and the API's read of the same log).
 */
import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import type { Browser } from 'playwright-core';
import { TWO_STEPS } from '../helpers/ci.ts';
import { freshDatabase, Client, uniq } from '../helpers/server.ts';
import { pushRepo, randomToken, serve, tempDir, userOn, type Served } from '../helpers/serve.ts';
import { checkPage, openBrowser, signIn, visit, watchedPage, type Watched } from '../helpers/browser.ts';
import { readAll, screen, waitForLine } from './log-viewer-helpers.ts';

let browser: Browser;
let data: string;
let db: string;
const servers: Served[] = [];

beforeAll(async () => {
  browser = await openBrowser();
  data = await tempDir('triad-logs-');
  db = await freshDatabase();
}, 60_000);
afterAll(async () => {
  for (const p of servers)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await Promise.all(servers.map((p) => p.exited));
  await browser?.close();
  await fs.rm(data, { recursive: true, force: true });
  const c = new pg.Client({ connectionString: `${process.env.TRIAD_TEST_PG}/postgres` });
  await c.connect();
  await c.query(`drop database if exists ${db.split('/').pop()} with (force)`);
  await c.end();
});

/** Lines of the build log: plain text, so what a row shows is the line itself. */
const line = (i: number) => `step output line ${String(i + 1).padStart(5, '0')} ${'·'.repeat(i % 40)}`;
const lines = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, k) => `${line(from + k)}\n`).join('');

describe('the live step log on a server that restarts', () => {
  test('the page resumes after a SIGKILL and a restart, and shows exactly the stored log', async () => {
    const adminToken = randomToken('adm_');
    const env = { TRIAD_DATA_DIR: data, DATABASE_URL: db, TRIAD_EMBEDDED_AGENT: 'off' };
    const first = await serve(env, adminToken);
    servers.push(first);
    const user = await userOn(first);
    const password = `pw-${uniq('p')}`;
    expect((await first.admin.patch(`/api/v1/admin/users/${user.username}`, { password })).status).toBe(200);
    const repo = await pushRepo(user, { '.pipeline.yml': TWO_STEPS });
    const made = await first.admin.post('/api/v1/admin/agents', { name: uniq('agent') });
    const agent = new Client(first.url, made.body.data.token);
    const job = (await agent.post('/api/v1/ci/poll')).body;
    const step = job.steps[0].id as number;
    expect((await agent.put(`/api/v1/ci/steps/${step}/status`, { status: 'running' })).status).toBe(200);
    const append = async (text: string) =>
      expect(
        (await agent.post(`/api/v1/ci/steps/${step}/log`, text, { 'content-type': 'text/plain' })).status,
      ).toBe(200);
    for (let i = 0; i < 1000; i += 250) await append(lines(i, i + 250));

    const w: Watched = await watchedPage(browser);
    await signIn(w, first.url, { username: user.username, password, token: user.token });
    const stepPage = `${first.url}/${repo.org}/${repo.name}/-/pipelines/1/steps/1`;
    const res = await visit(w, stepPage);
    await checkPage(w, res);
    await waitForLine(w.page, 1000, 15_000);

    // killed mid-stream, started again on the same port and database: more lines arrive
    first.child.kill('SIGKILL');
    await first.exited;
    const second = await serve(env, adminToken, first.port);
    servers.push(second);
    for (let i = 1000; i < 3000; i += 500) await append(lines(i, i + 500));
    await waitForLine(w.page, 3000, 30_000);
    expect(
      (await agent.put(`/api/v1/ci/steps/${step}/status`, { status: 'success', exit_code: 0 })).status,
    ).toBe(200);
    await w.page.waitForFunction(
      () =>
        /done|success|passed/i.test(
          (globalThis as any).document.querySelector('.lv-state')?.textContent ?? '',
        ),
      undefined,
      { timeout: 15_000 },
    );
    expect((await screen(w.page)).rows).toBeLessThanOrEqual(200);

    const shown = await readAll(w.page);
    const text = [...shown.keys()]
      .sort((a, b) => a - b)
      .map((n) => `${shown.get(n)}\n`)
      .join('');
    const raw = await w.page.evaluate(async (url: string) => {
      const r = await (globalThis as any).fetch(url);
      return r.text() as Promise<string>;
    }, `${stepPage}/raw`);
    expect(raw).toBe(lines(0, 3000));
    expect(text).toBe(raw);
    const api = await new Client(second.url, user.token).get(
      `/api/v1/repos/${repo.org}/${repo.name}/pipelines/1/steps/1/log`,
    );
    expect(api.text).toBe(raw);
    expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
    await w.context.close();
  });
});
