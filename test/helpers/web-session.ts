import { expect } from '@jest/globals';
import type { TestServer, TestUser } from './server.ts';

/** Gives `user` a password and signs in through the web's login form: its session cookie. */
export async function webSessionCookie(s: TestServer, user: TestUser): Promise<string> {
  expect(
    (await s.admin.patch(`/api/v1/admin/users/${user.username}`, { password: 'a-password' })).status,
  ).toBe(200);
  const r = await fetch(`${s.url}/-/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ login: user.username, password: 'a-password' }).toString(),
  });
  const cookie = /^(triad_session=[\w-]{43});/.exec(r.headers.get('set-cookie') ?? '')?.[1];
  if (cookie === undefined) throw new Error(`signing in ${user.username} failed: ${r.status}`);
  return cookie;
}
