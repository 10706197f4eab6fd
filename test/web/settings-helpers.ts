/** What the settings pages' browser tests share: sending a form, and a web user as an API user. */
import type { Response } from 'playwright-core';
import type { TestServer, TestUser } from '../helpers/server.ts';
import type { Watched, WebUser } from '../helpers/browser.ts';

/**
 * Clicks a form's submit button and answers the response to the POST (a redirect's own, not its
 * target's). The page has then loaded what came back: the page the redirect names, or the form
 * shown again. `follow: false` only waits for the browser to leave the form after a redirect, for
 * a target that may not load as a page (a private repository's clone URL asks for credentials
 * until the repository's own page answers browsers there).
 */
export async function submit(
  at: Watched,
  button: string | RegExp,
  opts: { follow?: boolean } = {},
): Promise<Response> {
  const before = at.page.url();
  const [res] = await Promise.all([
    at.page.waitForResponse((r) => r.request().method() === 'POST'),
    at.page.getByRole('button', { name: button, exact: typeof button === 'string' }).click(),
  ]);
  const to = res.status() === 303 ? res.headers().location : undefined;
  if (to === undefined) await at.page.waitForLoadState('load');
  else if (opts.follow === false) await at.page.waitForURL((u) => u.href !== before, { waitUntil: 'commit' });
  else await at.page.waitForURL(new URL(to, res.url()).href, { waitUntil: 'load' });
  return res;
}

/** A web user as the server helpers take an API user (for `newOrg`, `addMember`, `newRepo`). */
export function apiUser(ts: TestServer, u: WebUser): TestUser {
  return { id: 0, username: u.username, token: u.token, client: ts.anon.as(u.token) };
}
