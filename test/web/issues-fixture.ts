/**
 * What the issue pages' browser tests share: a team (an owner, a member and a stranger, each
 * signed in in a browser context of their own), a Git repository with issue templates pushed by
 * `git`, labels, and a form sent with a field list of the test's choosing (a forced POST).
 */
import { expect } from '@jest/globals';
import type { Browser, Response } from 'playwright-core';
import type { TestServer } from '../helpers/server.ts';
import { signIn, watchedPage, webUser, type Watched, type WebUser } from '../helpers/browser.ts';
import { newRepo, type NewRepo } from '../helpers/factories.ts';
import { pushFiles } from '../helpers/push-files.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { apiUser } from './settings-helpers.ts';

export type Team = { owner: WebUser; member: WebUser; stranger: WebUser; org: string };

export async function team(ts: TestServer): Promise<Team> {
  const [owner, member, stranger] = await Promise.all([webUser(ts), webUser(ts), webUser(ts)]);
  const org = await ts.newOrg(apiUser(ts, owner));
  await ts.addMember(org, apiUser(ts, member));
  return { owner, member, stranger, org };
}

/** A browser context signed in as `user` (`js: false`: with script off, signed in by cookie). */
export async function browserOf(
  browser: Browser,
  ts: TestServer,
  user: WebUser,
  js = true,
): Promise<Watched> {
  const w = await watchedPage(browser, { javaScript: js });
  if (js) {
    await signIn(w, ts.url, user);
    return w;
  }
  const helper = await watchedPage(browser);
  await signIn(helper, ts.url, user);
  await w.context.addCookies(await helper.context.cookies(ts.url));
  await helper.context.close();
  return w;
}

/** A repository of `vcs` with `files` pushed (none: empty), and its pages' base address. */
export async function repoWith(
  ts: TestServer,
  t: Team,
  vcs: VcsKind,
  files: Record<string, string> | undefined,
  opts: { isPrivate?: boolean } = {},
): Promise<{ repo: NewRepo; base: string; api: string }> {
  const repo = await newRepo(apiUser(ts, t.owner), t.org, { vcs, isPrivate: opts.isPrivate ?? false });
  if (files !== undefined) await pushFiles(vcs, repo.clone, t.owner.token, files);
  return { repo, base: `${ts.url}/${t.org}/${repo.name}/-/issues`, api: `${repo.api}/issues` };
}

/** A template file: YAML front matter and a body. */
export function template(front: Record<string, unknown>, body: string): string {
  return `---\n${Object.entries(front)
    .map(([k, v]) => `${k}: ${JSON.stringify(v)}`)
    .join('\n')}\n---\n${body}`;
}

/**
 * Sends a POST from the page as a form would (with the page's form token unless `fields` gives
 * one), as someone who forces a form the page does not offer; answers the POST's response once
 * what came back has loaded.
 */
export async function forcePost(
  w: Watched,
  action: string,
  fields: Record<string, string>,
): Promise<Response> {
  const [res] = await Promise.all([
    w.page.waitForResponse((r) => r.request().method() === 'POST'),
    w.page.evaluate(
      ({ action, fields }) => {
        const doc = (globalThis as any).document;
        const token = doc.querySelector('input[name="_csrf"]')?.value ?? '';
        const form = doc.createElement('form');
        form.method = 'post';
        form.action = action;
        for (const [name, value] of Object.entries({ _csrf: token, ...fields })) {
          const input = doc.createElement('input');
          input.type = 'hidden';
          input.name = name;
          input.value = value;
          form.append(input);
        }
        doc.body.append(form);
        form.submit();
      },
      { action, fields },
    ),
  ]);
  // (the page the answer is, or the page it redirects to, loaded: not the one it left)
  const to = res.status() === 303 ? (res.headers().location ?? action) : action;
  await w.page.waitForURL(new URL(to, res.url()).href, { waitUntil: 'load' });
  return res;
}

/** The texts of the elements matching `sel`, trimmed. */
export async function textsOf(w: Watched, sel: string): Promise<string[]> {
  return (await w.page.locator(sel).allTextContents()).map((t) => t.trim());
}

/** Expects the page to show an alert containing `text`. */
export async function expectAlert(w: Watched, text: string): Promise<void> {
  expect(await w.page.getByRole('alert').first().textContent()).toContain(text);
}
