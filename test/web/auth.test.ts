/**
 * Signing in and out of the web interface in a real browser, sessions, CSRF and the API's rule
 * that only the step-log read takes a session cookie.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import {
  checkPage,
  openBrowser,
  signIn,
  visit,
  watchedPage,
  webUser,
  type WebUser,
} from '../helpers/browser.ts';
import { commitFiles, gitRepo, newAgent, TWO_STEPS } from '../helpers/ci.ts';

let browser: Browser;
let ts: TestServer;

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

/** The session cookie a browser context holds for the server. */
async function sessionCookie(w: { context: import('playwright-core').BrowserContext }) {
  return (await w.context.cookies(ts.url)).find((c) => c.name === 'triad_session');
}

describe('sign-in', () => {
  test('when a user signs in with the form, then the pages know them until they sign out', async () => {
    const user = await webUser(ts);
    const w = await watchedPage(browser);
    const login = await visit(w, `${ts.url}/-/login`);
    await checkPage(w, login);
    await signIn(w, ts.url, user);
    expect(new URL(w.page.url()).pathname).toBe('/');
    expect(await w.page.locator('summary').first().textContent()).toBe(user.username);
    await checkPage(w, (await w.page.reload())!);
    const cookie = await sessionCookie(w);
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false, path: '/' });
    expect(cookie!.value).toMatch(/^[A-Za-z0-9_-]{43}$/);

    await w.page.locator('summary').first().click();
    await Promise.all([
      w.page.waitForURL(`${ts.url}/`),
      w.page.getByRole('button', { name: 'Sign out' }).click(),
    ]);
    expect(await w.page.getByRole('link', { name: 'Sign in' }).count()).toBe(1);
    expect(await sessionCookie(w)).toBeUndefined();
    // the old cookie names nothing any more: a copy of it is anonymous
    const replay = await fetch(`${ts.url}/`, { headers: { cookie: `triad_session=${cookie!.value}` } });
    expect(await replay.text()).toContain('>Sign in<');
    await w.context.close();
  });

  test('when the e-mail address is the login, then it signs in too, and the page asked for comes back', async () => {
    const user = await webUser(ts);
    const w = await watchedPage(browser);
    await visit(w, `${ts.url}/-/settings/sessions`, 200);
    expect(new URL(w.page.url()).pathname).toBe('/-/login');
    await w.page.getByLabel('Username or e-mail address').fill(`${user.username}@example.test`);
    await w.page.getByLabel('Password').fill(user.password);
    await Promise.all([
      w.page.waitForURL(`${ts.url}/-/settings/sessions`),
      w.page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    await w.context.close();
  });

  test('when the password is wrong, then the form says so with the login kept and nobody is signed in', async () => {
    const user = await webUser(ts);
    const w = await watchedPage(browser);
    await visit(w, `${ts.url}/-/login`);
    await w.page.getByLabel('Username or e-mail address').fill(user.username);
    await w.page.getByLabel('Password').fill('not-the-password');
    const [res] = await Promise.all([
      w.page.waitForResponse((r) => r.request().method() === 'POST'),
      w.page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    expect(res.status()).toBe(401);
    await expect(w.page.getByRole('alert').textContent()).resolves.toContain('not right');
    expect(await w.page.getByLabel('Username or e-mail address').inputValue()).toBe(user.username);
    expect(await w.page.getByLabel('Password').inputValue()).toBe('');
    expect(await sessionCookie(w)).toBeUndefined();
    await w.context.close();
  });

  test('when a sign-in asks to come back elsewhere, then it only goes to a path of this server', async () => {
    const user = await webUser(ts);
    const w = await watchedPage(browser);
    await signIn(w, ts.url, user, '//evil.example/x');
    expect(w.page.url()).toBe(`${ts.url}/`);
    await w.context.close();
  });

  test('when a session is revoked from another browser, then the first is signed out', async () => {
    const user = await webUser(ts);
    const a = await watchedPage(browser);
    const b = await watchedPage(browser);
    await signIn(a, ts.url, user);
    await signIn(b, ts.url, user);
    const res = await visit(b, `${ts.url}/-/settings/sessions`);
    await checkPage(b, res);
    const rows = b.page.locator('table.list tbody tr');
    expect(await rows.count()).toBe(2);
    // the other session is the row without "this session"
    const other = rows.filter({ hasNotText: 'This session' });
    await Promise.all([
      b.page.waitForLoadState('load'),
      other.getByRole('button', { name: /Revoke/ }).click(),
    ]);
    await b.page.waitForURL(`${ts.url}/-/settings/sessions`);
    expect(await b.page.locator('table.list tbody tr').count()).toBe(1);
    await a.page.reload();
    expect(await a.page.getByRole('link', { name: 'Sign in' }).count()).toBe(1);
    // b is still signed in
    await b.page.goto(`${ts.url}/`);
    expect(await b.page.locator('summary').first().textContent()).toBe(user.username);
    await a.context.close();
    await b.context.close();
  });
});

describe('forms from elsewhere', () => {
  let user: WebUser;
  let attacker: http.Server;
  let attackerPort = 0;

  beforeAll(async () => {
    user = await webUser(ts);
    // a page of another origin whose form posts to Triad (what a malicious site would serve)
    attacker = http.createServer((req, res) => {
      const name = new URL(req.url ?? '/', 'http://x').searchParams.get('name') ?? 'x';
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><form method="post" action="${ts.url}/-/new/org">
        <input name="name" value="${name}"><input name="_csrf" value="guess"><button>go</button></form>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.2', resolve));
    attackerPort = (attacker.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => attacker.close(resolve));
  });

  test('when a page of another site posts a form to Triad, then nothing changes', async () => {
    const w = await watchedPage(browser);
    await signIn(w, ts.url, user);
    const name = `evil${Date.now()}`;
    await w.page.goto(`http://127.0.0.2:${attackerPort}/?name=${name}`);
    await Promise.all([w.page.waitForLoadState('load'), w.page.getByRole('button', { name: 'go' }).click()]);
    await w.page.waitForLoadState('load');
    expect((await ts.anon.get(`/api/v1/orgs/${name}`)).status).toBe(404);
    await w.context.close();
  });

  test('when a page of the same site but another origin posts with the cookie, then the origin check refuses it', async () => {
    // localhost:<other port> is the same site as localhost:<port> (ports do not count), so the
    // browser sends the SameSite=Lax cookie: only the server's origin check stops the form
    const same = http.createServer((req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><form method="post" action="${ts.url}/-/new/org">
        <input name="name" value="${new URL(req.url ?? '/', 'http://x').searchParams.get('name')}"><button>go</button></form>`);
    });
    await new Promise<void>((resolve) => same.listen(0, '127.0.0.1', resolve));
    const port = (same.address() as AddressInfo).port;
    try {
      const w = await watchedPage(browser);
      await signIn(w, ts.url, user);
      const name = `samesite${Date.now()}`;
      await w.page.goto(`http://localhost:${port}/?name=${name}`);
      const [res] = await Promise.all([
        w.page.waitForResponse((r) => r.request().method() === 'POST'),
        w.page.getByRole('button', { name: 'go' }).click(),
      ]);
      expect(res.status()).toBe(403);
      expect(await res.request().headerValue('cookie')).toContain('triad_session=');
      expect((await ts.anon.get(`/api/v1/orgs/${name}`)).status).toBe(404);
      await w.context.close();
    } finally {
      await new Promise((resolve) => same.close(resolve));
    }
  });

  test('when a form carries a wrong form token, then it is shown again with the text kept and nothing changes', async () => {
    const w = await watchedPage(browser);
    await signIn(w, ts.url, user);
    await visit(w, `${ts.url}/-/new/org`);
    const name = `stale${Date.now()}`;
    await w.page.getByLabel('Name', { exact: true }).fill(name);
    await w.page.getByLabel('Description').fill('kept description');
    await w.page.evaluate(() => {
      for (const i of (globalThis as any).document.querySelectorAll('form input[name="_csrf"]'))
        i.value = 'stale';
    });
    const [res] = await Promise.all([
      w.page.waitForResponse((r) => r.request().method() === 'POST'),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    expect(res.status()).toBe(403);
    await expect(w.page.getByRole('alert').textContent()).resolves.toContain('nothing was changed');
    expect(await w.page.getByLabel('Name', { exact: true }).inputValue()).toBe(name);
    expect(await w.page.getByLabel('Description').inputValue()).toBe('kept description');
    expect((await ts.anon.get(`/api/v1/orgs/${name}`)).status).toBe(404);
    // sent again from the page shown (with the right token), it goes through
    await Promise.all([
      w.page.waitForURL(`${ts.url}/${name}`),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    expect((await ts.anon.get(`/api/v1/orgs/${name}`)).status).toBe(200);
    await w.context.close();
  });
});

describe('the API and the session cookie', () => {
  test('when a request to /api/v1 carries only the cookie, then it is anonymous (401), but for the step log', async () => {
    const user = await webUser(ts);
    const owner = await ts.newUser();
    const org = await ts.newOrg(owner);
    await ts.addMember(org, { ...owner, username: user.username });
    const w = await watchedPage(browser);
    await signIn(w, ts.url, user);
    const cookie = `triad_session=${(await sessionCookie(w))!.value}`;
    // a write and a read with only the cookie: anonymous
    const write = await fetch(`${ts.url}/api/v1/orgs`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ name: 'viacookie' }),
    });
    expect(write.status).toBe(401);
    expect(((await write.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    expect((await fetch(`${ts.url}/api/v1/user`, { headers: { cookie } })).status).toBe(401);

    // a private repository's pipeline with a step log
    const repo = await gitRepo(ts, owner, org, true);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    const agent = await newAgent(ts);
    let job: any;
    for (let i = 0; i < 50 && job === undefined; i++) {
      const r = await agent.post('/api/v1/ci/poll');
      if (r.status === 200) job = r.body;
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(job).toBeDefined();
    const step = job.steps[0];
    expect(
      (
        await agent.put(`/api/v1/ci/steps/${step.id}/status`, {
          status: 'running',
          started_at: new Date().toISOString(),
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await agent.post(`/api/v1/ci/steps/${step.id}/log?offset=0`, 'hello from the step\n', {
          'content-type': 'text/plain',
        })
      ).status,
    ).toBe(200);
    const logPath = `${ts.url}/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/1/log`;
    const read = await fetch(logPath, { headers: { cookie } });
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('hello from the step\n');
    // without the cookie, or with a stranger's session, the private repository is not there
    expect((await fetch(logPath)).status).toBe(401);
    const stranger = await webUser(ts);
    const s = await watchedPage(browser);
    await signIn(s, ts.url, stranger);
    const strangerCookie = `triad_session=${(await sessionCookie(s))!.value}`;
    expect((await fetch(logPath, { headers: { cookie: strangerCookie } })).status).toBe(404);
    await w.context.close();
    await s.context.close();
  });
});

describe('throttled sign-ins', () => {
  let tight: TestServer;
  beforeAll(async () => {
    tight = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '3', TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '60' });
  });
  afterAll(async () => {
    await tight?.close();
  });

  test('when passwords are guessed from one address, then sign-ins are refused with 429 for a while', async () => {
    const user = await webUser(tight);
    const post = (password: string) =>
      fetch(`${tight.url}/-/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
        body: new URLSearchParams({ login: user.username, password }).toString(),
      });
    for (const guess of ['guess-1', 'guess-2', 'guess-3']) expect((await post(guess)).status).toBe(401);
    const blocked = await post('guess-4');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await blocked.text()).toContain('too many failed authentications');
    // even the right password waits for the window (the address is blocked for new credentials)
    expect((await post(user.password)).status).toBe(429);
  });
});
