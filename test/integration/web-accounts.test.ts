/**
 * Passwords and web sessions through the API and the web's forms (over HTTP, as a browser sends
 * them): the administrator sets passwords (create and PATCH), a new password ends sessions, the
 * user's own change keeps the session that made it, and sessions end after their lifetimes.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer } from '../helpers/server.ts';
import { expectError } from '../helpers/factories.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.close();
});

/** Posts a form as a browser on this origin would (no redirect followed). */
function form(
  base: string,
  path: string,
  fields: Record<string, string>,
  cookie?: string,
): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'sec-fetch-site': 'same-origin',
      ...(cookie === undefined ? {} : { cookie }),
    },
    body: new URLSearchParams(fields).toString(),
  });
}

/** Signs in and answers the session cookie (`name=value`), or undefined when refused. */
async function signIn(base: string, login: string, password: string): Promise<string | undefined> {
  const r = await form(base, '/-/login', { login, password });
  if (r.status !== 303) return undefined;
  return /^(triad_session=[\w-]{43});/.exec(r.headers.get('set-cookie') ?? '')?.[1];
}

/** Who the start page says is signed in with this cookie (undefined: nobody). */
async function whoIs(base: string, cookie: string): Promise<string | undefined> {
  const text = await (await fetch(`${base}/`, { headers: { cookie } })).text();
  return /aria-label="Account menu of ([^"]+)"/.exec(text)?.[1];
}

describe('passwords set by an administrator', () => {
  test('when a user is created with a password, then it signs in, and no answer ever shows the password', async () => {
    const username = uniq('pw');
    const r = await s.admin.post('/api/v1/admin/users', {
      username,
      email: `${username}@example.test`,
      password: 'created-with-password',
    });
    expect(r.status).toBe(201);
    expect(JSON.stringify(r.body)).not.toContain('password');
    expect(Object.keys(r.body.data).sort()).toEqual(
      ['avatar_url', 'created_at', 'display_name', 'email', 'id', 'is_admin', 'username'].sort(),
    );
    const cookie = await signIn(s.url, username, 'created-with-password');
    expect(await whoIs(s.url, cookie!)).toBe(username);
    expect(await signIn(s.url, username, 'another-password')).toBeUndefined();
  });

  test('when a password is too short, then create and PATCH answer 400 and nothing is written', async () => {
    const username = uniq('short');
    expectError(
      await s.admin.post('/api/v1/admin/users', {
        username,
        email: `${username}@example.test`,
        password: 'short',
      }),
      400,
      'validation_failed',
    );
    expect((await s.admin.get(`/api/v1/admin/users/${username}`)).status).toBe(404);
    const u = await s.newUser();
    const r = await s.admin.patch(`/api/v1/admin/users/${u.username}`, {
      email: 'new@example.test',
      password: 'short',
    });
    expectError(r, 400, 'validation_failed');
    expect(r.body.error.message).toContain('body.password');
    expect((await s.admin.get(`/api/v1/admin/users/${u.username}`)).body.data.email).toBe(
      `${u.username}@example.test`,
    );
  });

  test('when an administrator PATCHes a user, then the fields given change and the others stay', async () => {
    const u = await s.newUser();
    const r = await s.admin.patch(`/api/v1/admin/users/${u.username.toUpperCase()}`, {
      display_name: 'New Name',
      email: 'renamed@example.test',
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({
      username: u.username,
      display_name: 'New Name',
      email: 'renamed@example.test',
      is_admin: false,
    });
    const empty = await s.admin.patch(`/api/v1/admin/users/${u.username}`, {});
    expect(empty.body.data).toEqual(r.body.data);
    expectError(
      await s.admin.patch('/api/v1/admin/users/nobody-here', { display_name: 'x' }),
      404,
      'not_found',
    );
    expectError(
      await u.client.patch(`/api/v1/admin/users/${u.username}`, { display_name: 'x' }),
      403,
      'forbidden',
    );
    expectError(
      await s.anon.patch(`/api/v1/admin/users/${u.username}`, { display_name: 'x' }),
      401,
      'unauthorized',
    );
    expectError(
      await s.admin.patch(`/api/v1/admin/users/${u.username}`, { display_name: '   ' }),
      400,
      'validation_failed',
    );
    // (last: an administrator may call it)
    const promoted = await s.admin.patch(`/api/v1/admin/users/${u.username}`, { is_admin: true });
    expect(promoted.body.data.is_admin).toBe(true);
  });

  test('when the last site administrator would lose the flag, then 409; with another one, it may', async () => {
    const solo = await startTestServer();
    try {
      expectError(await solo.admin.patch('/api/v1/admin/users/root', { is_admin: false }), 409, 'conflict');
      const other = await solo.newUser(undefined, { admin: true });
      expect(
        (await solo.admin.patch('/api/v1/admin/users/root', { is_admin: false })).body.data.is_admin,
      ).toBe(false);
      expectError(
        await other.client.patch(`/api/v1/admin/users/${other.username}`, { is_admin: false }),
        409,
        'conflict',
      );
    } finally {
      await solo.close();
    }
  });

  test("when an administrator sets a user's password, then every session of that user ends", async () => {
    const u = await s.newUser();
    expect(
      (await s.admin.patch(`/api/v1/admin/users/${u.username}`, { password: 'first-password' })).status,
    ).toBe(200);
    const a = (await signIn(s.url, u.username, 'first-password'))!;
    const b = (await signIn(s.url, `${u.username}@example.test`, 'first-password'))!;
    expect(await whoIs(s.url, a)).toBe(u.username);
    expect(await whoIs(s.url, b)).toBe(u.username);
    expect(
      (await s.admin.patch(`/api/v1/admin/users/${u.username}`, { password: 'second-password' })).status,
    ).toBe(200);
    expect(await whoIs(s.url, a)).toBeUndefined();
    expect(await whoIs(s.url, b)).toBeUndefined();
    expect(await signIn(s.url, u.username, 'first-password')).toBeUndefined();
    expect(await signIn(s.url, u.username, 'second-password')).toBeDefined();
  });
});

describe("the user's own password and sessions", () => {
  test('when a user changes the password, then the other sessions end and this one goes on under a new id', async () => {
    const u = await s.newUser();
    await s.admin.patch(`/api/v1/admin/users/${u.username}`, { password: 'old-password' });
    const mine = (await signIn(s.url, u.username, 'old-password'))!;
    const other = (await signIn(s.url, u.username, 'old-password'))!;
    const page = await (await fetch(`${s.url}/-/settings/password`, { headers: { cookie: mine } })).text();
    const token = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;

    const wrong = await form(
      s.url,
      '/-/settings/password',
      {
        _csrf: token,
        current_password: 'not-it',
        password: 'new-password',
        password_confirm: 'new-password',
      },
      mine,
    );
    expect(wrong.status).toBe(403);
    expect(await wrong.text()).toContain('the current password is not right');
    const mismatch = await form(
      s.url,
      '/-/settings/password',
      { _csrf: token, current_password: 'old-password', password: 'new-password', password_confirm: 'other' },
      mine,
    );
    expect(mismatch.status).toBe(400);
    expect(await whoIs(s.url, other)).toBe(u.username);

    const ok = await form(
      s.url,
      '/-/settings/password',
      {
        _csrf: token,
        current_password: 'old-password',
        password: 'new-password',
        password_confirm: 'new-password',
      },
      mine,
    );
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/-/settings/password?changed=1');
    const renewed = /^(triad_session=[\w-]{43});/.exec(ok.headers.get('set-cookie') ?? '')![1]!;
    expect(renewed).not.toBe(mine);
    expect(await whoIs(s.url, renewed)).toBe(u.username);
    expect(await whoIs(s.url, mine)).toBeUndefined();
    expect(await whoIs(s.url, other)).toBeUndefined();
    expect(await signIn(s.url, u.username, 'new-password')).toBeDefined();
  });
});

describe('session lifetimes', () => {
  let short: TestServer;
  beforeAll(async () => {
    short = await startTestServer({ TRIAD_SESSION_IDLE: '2s', TRIAD_SESSION_MAX: '5s' });
  });
  afterAll(async () => {
    await short?.close();
  });
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  test('when a session is idle longer than TRIAD_SESSION_IDLE, then it has ended; one in use lasts until TRIAD_SESSION_MAX', async () => {
    const u = await short.newUser();
    await short.admin.patch(`/api/v1/admin/users/${u.username}`, { password: 'a-password' });
    const set = await form(short.url, '/-/login', { login: u.username, password: 'a-password' });
    expect(set.headers.get('set-cookie')).toContain('Max-Age=5;');
    // Each session begins somewhere during its sign-in (argon2 takes a while on a loaded machine):
    // `idle` after ti, `busy` between t0 and t1. The checks are placed by those bounds, not by
    // counting pauses; they hold while two sign-ins and a page take under ~2.9 s together.
    const ti = Date.now();
    const idle = (await signIn(short.url, u.username, 'a-password'))!;
    const t0 = Date.now();
    const busy = (await signIn(short.url, u.username, 'a-password'))!;
    const t1 = Date.now();
    const at = (ms: number) => pause(Math.max(0, t1 + ms - Date.now()));
    const use = async (ms: number) => {
      await at(ms);
      const who = await whoIs(short.url, busy);
      // answered before the earliest possible end: still signed in
      if (Date.now() < t0 + 5000) expect(who).toBe(u.username);
      return who;
    };
    // `busy` is used every 700 ms (well inside the 2 s idle lifetime) until past its 5 s end.
    await use(700);
    await use(1400);
    // `idle`, unused for more than 2 s but short of its absolute end, has ended; `busy` has not
    await at(2100);
    expect(await whoIs(short.url, idle)).toBeUndefined();
    expect(Date.now()).toBeLessThan(ti + 5000); // (else it might have ended by its absolute lifetime)
    expect(await use(2100)).toBe(u.username);
    for (const ms of [2800, 3500, 4200, 4900]) await use(ms);
    await at(5400);
    // past the absolute lifetime, even a session in use (last used half a second ago) has ended
    expect(await whoIs(short.url, busy)).toBeUndefined();
  });
});

describe('guesses and made-up links', () => {
  let tight: TestServer;
  beforeAll(async () => {
    tight = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '2' });
  });
  afterAll(async () => {
    await tight?.close();
  });

  test('when the current password is guessed on the password page, then the guesses are throttled like sign-ins', async () => {
    const u = await tight.newUser();
    await tight.admin.patch(`/api/v1/admin/users/${u.username}`, { password: 'the-password' });
    const cookie = (await signIn(tight.url, u.username, 'the-password'))!;
    const page = await (await fetch(`${tight.url}/-/settings/password`, { headers: { cookie } })).text();
    const token = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;
    const change = (current: string) =>
      form(
        tight.url,
        '/-/settings/password',
        {
          _csrf: token,
          current_password: current,
          password: 'new-password',
          password_confirm: 'new-password',
        },
        cookie,
      );
    expect((await change('guess-1')).status).toBe(403);
    expect((await change('guess-2')).status).toBe(403);
    const blocked = await change('guess-3');
    expect(blocked.status).toBe(429);
    expect(await blocked.text()).toContain('too many failed authentications');
    expect((await change('the-password')).status).toBe(429);
    // nothing changed
    expect(await whoIs(tight.url, cookie)).toBe(u.username);
  });

  test('when a made-up password link is posted, then it is 404 and nobody signs in', async () => {
    const r = await form(s.url, '/-/password/set', {
      token: 'triad_pw_0000000000000000000000000000000000000000000000ff',
      password: 'long-enough-password',
      password_confirm: 'long-enough-password',
    });
    expect(r.status).toBe(404);
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  test('when a password is set through a link in a browser signed in as someone else, then that session ends', async () => {
    const a = await s.newUser();
    await s.admin.patch(`/api/v1/admin/users/${a.username}`, { password: 'a-password' });
    const cookieA = (await signIn(s.url, a.username, 'a-password'))!;
    const b = await s.newUser();
    const link = await s.running.services.users.passwords.createLink(b.id, 60_000);
    const r = await form(
      s.url,
      '/-/password/set',
      { token: link, password: 'b-password', password_confirm: 'b-password' },
      cookieA,
    );
    expect(r.status).toBe(303);
    const cookieB = /^(triad_session=[\w-]{43});/.exec(r.headers.get('set-cookie') ?? '')![1]!;
    expect(await whoIs(s.url, cookieB)).toBe(b.username);
    expect(await whoIs(s.url, cookieA)).toBeUndefined();
  });

  test('when a form is larger than the form limit, then the answer is an HTML page with the page headers, not the API envelope', async () => {
    const r = await fetch(`${s.url}/-/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      body: `login=${'x'.repeat(1_100_000)}&password=y`,
    });
    expect(r.status).toBe(413);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await r.text()).toContain('<h1>Too large</h1>');
  });
});
