/**
 * What the pull request pages' browser tests share: a server with an organization whose owner
 * signs in with a password, a signed-in user who is no member, repositories of each kind with a
 * working copy (test/helpers/pulls.ts), and small page helpers.
 */
import { expect } from '@jest/globals';
import type { TestServer, TestUser } from '../helpers/server.ts';
import { uniq } from '../helpers/server.ts';
import type { WebUser, Watched } from '../helpers/browser.ts';

export type PullWorld = {
  ts: TestServer;
  org: string;
  owner: TestUser;
  ownerWeb: WebUser;
  outsiderWeb: WebUser;
};

/** A user (with an API token) who can also sign in with a password. */
async function passwordUser(ts: TestServer): Promise<{ user: TestUser; web: WebUser }> {
  const user = await ts.newUser();
  const password = `pw-${uniq('p')}`;
  const r = await ts.admin.patch(`/api/v1/admin/users/${user.username}`, { password });
  if (r.status !== 200) throw new Error(`password: ${r.status} ${r.text}`);
  return { user, web: { username: user.username, password, token: user.token } };
}

export async function pullWorld(ts: TestServer): Promise<PullWorld> {
  const [o, x] = await Promise.all([passwordUser(ts), passwordUser(ts)]);
  const org = await ts.newOrg(o.user);
  return { ts, org, owner: o.user, ownerWeb: o.web, outsiderWeb: x.web };
}

/** The trimmed text of the first element matching `sel`. */
export async function textOf(w: Watched, sel: string): Promise<string> {
  return ((await w.page.locator(sel).first().textContent()) ?? '').replace(/\s+/g, ' ').trim();
}

/**
 * Submits a POST form built in the page (what a forced request from Triad's own page looks
 * like: same origin, the session's form token taken from the page), and waits for the answer.
 */
export async function forcePost(w: Watched, action: string, fields: Record<string, string>): Promise<number> {
  const [res] = await Promise.all([
    w.page.waitForNavigation(),
    w.page.evaluate(
      ({ action, fields }) => {
        const doc = (globalThis as any).document;
        const token = doc.querySelector('input[name="_csrf"]')?.value ?? '';
        const form = doc.createElement('form');
        form.method = 'post';
        form.action = action;
        for (const [k, v] of Object.entries({ _csrf: token, ...fields })) {
          const i = doc.createElement('input');
          i.type = 'hidden';
          i.name = k;
          i.value = v;
          form.append(i);
        }
        doc.body.append(form);
        form.submit();
      },
      { action, fields },
    ),
  ]);
  expect(res).not.toBeNull();
  return res!.status();
}

/** Waits until the merge box has an answer (the `recheck` island loads it again while checking). */
export async function settledBox(w: Watched): Promise<string> {
  await w.page.waitForFunction(
    () => (globalThis as any).document.querySelector('section.merge-box:not([data-recheck])') !== null,
    undefined,
    { timeout: 60_000 },
  );
  return textOf(w, 'section.merge-box h2');
}
