/**
 * Repositories for the code pages' browser tests, made through the API and pushed with the real
 * `git`, `hg` and `fossil` clients: a README.md with a heading, a relative link and a relative
 * image, a source file, a nested directory, a small PNG, two commits, a tag, a branch (and a
 * Mercurial bookmark).
 */
import { expect } from '@jest/globals';
import type { Browser, BrowserContext } from 'playwright-core';
import type { TestServer, TestUser } from '../helpers/server.ts';
import { signIn, watchedPage, webUser, type Watched, type WebUser } from '../helpers/browser.ts';
import { newRepo, type NewRepo } from '../helpers/factories.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/** A 1x1 PNG. */
export const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);
export const README = `# Hello Triad

Read [the guide](docs/guide.md) first.

![the logo](img/logo.png)
`;
export const MAIN_1 = 'export function main(): number {\n  const answer = 41;\n  return answer;\n}\n';
export const MAIN_2 = 'export function main(): number {\n  const answer = 42;\n  return answer;\n}\n';

export type World = { ts: TestServer; user: WebUser; owner: TestUser; org: string };

/** A signed-up user (with a password for the sign-in form) who owns an organization. */
export async function world(ts: TestServer): Promise<World> {
  const user = await webUser(ts);
  const owner: TestUser = {
    id: 0,
    username: user.username,
    token: user.token,
    client: ts.anon.as(user.token),
  };
  const org = await ts.newOrg(owner);
  return { ts, user, owner, org };
}

/** A signed-in browser context of `user`. */
export async function signedIn(browser: Browser, ts: TestServer, user: WebUser, js = true): Promise<Watched> {
  const w = await watchedPage(browser, { javaScript: js });
  if (!js) {
    // the sign-in form works without script, but sign in with it once to get the cookie
    const helper = await watchedPage(browser);
    await signIn(helper, ts.url, user);
    await w.context.addCookies(await helper.context.cookies(ts.url));
    await helper.context.close();
    return w;
  }
  await signIn(w, ts.url, user);
  return w;
}

/** The `cookie` header of a context's session, for fetch. */
export async function cookieOf(ctx: BrowserContext, url: string): Promise<string> {
  return (await ctx.cookies(url)).map((c) => `${c.name}=${c.value}`).join('; ');
}

export type Pushed = { repo: NewRepo; c1: string; c2: string; branch: string; work: string };

const git = (args: string[], cwd: string) => ok('git', args, cwd);
const hg = (args: string[], cwd: string) => ok('hg', args, cwd);
const fossil = (args: string[], cwd: string) => ok('fossil', args, cwd);

export const MAIN_PY_1 = 'def main():\n    answer = 41\n    return answer\n';
export const MAIN_PY_2 = 'def main():\n    answer = 42\n    return answer\n';

async function writeFirst(dir: string, mainFile: string): Promise<void> {
  await writeFile(dir, 'README.md', README);
  await writeFile(dir, mainFile, mainFile.endsWith('.py') ? MAIN_PY_1 : MAIN_1);
  await writeFile(dir, 'docs/guide.md', '# Guide\n\nSee the [README](../README.md).\n');
  await writeFile(dir, 'docs/deep/nested/notes.txt', 'deep\n');
  await writeFile(dir, 'img/logo.png', PNG);
}

/** Pushes the standard content to a new repository of `vcs` (public unless `isPrivate`). */
export async function pushedRepo(
  w: World,
  vcs: VcsKind,
  opts: { isPrivate?: boolean } = {},
): Promise<Pushed> {
  const repo = await newRepo(w.owner, w.org, { vcs, isPrivate: opts.isPrivate ?? false });
  const url = withCreds(repo.clone, w.owner.token);
  const work = await tempDir(`triad-web-${vcs}-`);
  const branch = 'feature/x';
  if (vcs === 'git') {
    await git(['init', '-q', '-b', 'main', '.'], work);
    await writeFirst(work, 'src/main.ts');
    await git(['add', '.'], work);
    await git(['commit', '-q', '-m', 'First commit\n\nWith a body line.'], work);
    const c1 = (await git(['rev-parse', 'HEAD'], work)).trim();
    await writeFile(work, 'src/main.ts', MAIN_2);
    await git(['commit', '-q', '-am', 'Second commit'], work);
    const c2 = (await git(['rev-parse', 'HEAD'], work)).trim();
    await git(['tag', 'v1.0'], work);
    await git(['checkout', '-q', '-b', branch], work);
    await writeFile(work, 'src/feature.ts', 'export const feature = true;\n');
    await git(['add', '.'], work);
    await git(['commit', '-q', '-m', 'Feature work'], work);
    await git(['checkout', '-q', 'main'], work);
    await git(['push', '-q', url, 'main', branch, '--tags'], work);
    return { repo, c1, c2, branch, work };
  }
  if (vcs === 'hg') {
    await hg(['init', '.'], work);
    await writeFirst(work, 'src/main.py');
    await hg(['add', '-q'], work);
    await hg(['commit', '-m', 'First commit\n\nWith a body line.'], work);
    const id = async () => (await hg(['log', '-r', '.', '-T', '{node}'], work)).trim();
    const c1 = await id();
    await writeFile(work, 'src/main.py', MAIN_PY_2);
    await hg(['commit', '-m', 'Second commit'], work);
    const c2 = await id();
    await hg(['tag', '-r', c2, 'v1.0'], work);
    await hg(['bookmark', '-r', c2, 'bm1'], work);
    await hg(['branch', '-q', branch], work);
    await writeFile(work, 'src/feature.py', 'FEATURE = True\n');
    await hg(['add', '-q'], work);
    await hg(['commit', '-m', 'Feature work'], work);
    await hg(['update', '-q', 'default'], work);
    await hg(['push', '-q', '--new-branch', url], work);
    // (-B alone would push only the bookmark's ancestors; now it only sends the bookmark)
    await sh('hg', ['push', '-q', '-B', 'bm1', url], work);
    return { repo, c1, c2, branch, work };
  }
  const dir = await tempDir('triad-web-fossil-');
  await fossil(['clone', '-B', `x:${w.owner.token}`, repo.clone, `${dir}/repo.fossil`], dir);
  await fossil(['open', '-f', '--workdir', work, `${dir}/repo.fossil`], dir);
  await fossil(['settings', 'autosync', 'off'], work);
  const commit = async (message: string, extra: string[] = []) => {
    await fossil(['addremove', '--dotfiles'], work);
    await fossil(['commit', '--user', 'ada', '--no-warnings', '-m', message, ...extra], work);
    const out = await fossil(
      ['sql', "SELECT uuid FROM blob WHERE rid = (SELECT value FROM vvar WHERE name = 'checkout')"],
      work,
    );
    return out.replace(/'/g, '').trim();
  };
  await writeFirst(work, 'src/main.py');
  const c1 = await commit('First commit\n\nWith a body line.');
  // Fossil orders by time: each check-in a second after the last
  await new Promise((r) => setTimeout(r, 1100));
  await writeFile(work, 'src/main.py', MAIN_PY_2);
  const c2 = await commit('Second commit', ['--tag', 'v1.0']);
  await new Promise((r) => setTimeout(r, 1100));
  await writeFile(work, 'src/feature.py', 'FEATURE = True\n');
  await commit('Feature work', ['--branch', branch]);
  await fossil(['update', 'trunk'], work);
  await fossil(['push', '-B', `x:${w.owner.token}`, repo.clone], work);
  return { repo, c1, c2, branch, work };
}

/** Clones `clone` again with the kind's client and answers the checkout's README. */
export async function cloneAgain(vcs: VcsKind, clone: string, token: string): Promise<string> {
  const dir = await tempDir(`triad-web-clone-${vcs}-`);
  if (vcs === 'git') await git(['clone', '-q', withCreds(clone, token), `${dir}/c`], dir);
  else if (vcs === 'hg') await hg(['clone', '-q', withCreds(clone, token), `${dir}/c`], dir);
  else {
    await fossil(['clone', '-B', `x:${token}`, clone, `${dir}/c.fossil`], dir);
    await fossil(['open', '-f', '--workdir', `${dir}/c`, `${dir}/c.fossil`], dir);
  }
  const fs = await import('node:fs/promises');
  return fs.readFile(`${dir}/c/README.md`, 'utf8');
}

/** The text of the first element matching `sel`. */
export async function textOf(w: Watched, sel: string): Promise<string> {
  return (await w.page.locator(sel).first().textContent()) ?? '';
}

/** The rendered README, the clone URL and the last commit on a repository home. */
export async function expectHome(w: Watched, p: Pushed): Promise<void> {
  const md = w.page.locator('.readme .markdown');
  expect(await md.locator('h1').textContent()).toBe('Hello Triad');
  const base = `/${p.repo.data.org}/${p.repo.name}/-`;
  const def = encodeURIComponent(p.repo.data.default_branch);
  expect(await md.locator('a', { hasText: 'the guide' }).getAttribute('href')).toBe(
    `${base}/blob/${def}/docs/guide.md`,
  );
  const img = md.locator('img');
  expect(await img.getAttribute('src')).toBe(`${base}/raw/${def}/img/logo.png`);
  await expect(img.evaluate((el: any) => el.complete && el.naturalWidth)).resolves.toBe(1);
  expect(await w.page.getByLabel('Clone URL').inputValue()).toBe(p.repo.clone);
}
