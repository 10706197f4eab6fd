/**
 * The label pages in a real browser, at each scope: a site administrator, an organization's owner
 * and a repository's owner create, rename and recolour, and delete labels (a label in use leaves
 * its issues, as the confirmation counted); the repository's page shows the merged catalog with
 * scopes and shadows; a member sees it without forms and is refused when posting anyway; the pages
 * read without script; hostile names and descriptions stay text, and every chip's text contrasts.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type Client, type TestServer } from '../helpers/server.ts';
import { newRepo, type NewRepo } from '../helpers/factories.ts';
import {
  checkPage,
  expectInert,
  openBrowser,
  screenshot,
  signIn,
  visit,
  watchedPage,
  webUser,
  type Watched,
  type WebUser,
} from '../helpers/browser.ts';
import { apiUser, submit } from './settings-helpers.ts';
import { expectChipContrast, fillLabel, labelRow } from './label-helpers.ts';

let browser: Browser;
let ts: TestServer;
let admin: WebUser;
let owner: WebUser;
let member: WebUser;
let org: string;
let repo: NewRepo;
let ownerApi: Client;
let memberApi: Client;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  [admin, owner, member] = await Promise.all([
    webUser(ts, undefined, { admin: true }),
    webUser(ts),
    webUser(ts),
  ]);
  org = await ts.newOrg(apiUser(ts, owner));
  await ts.addMember(org, apiUser(ts, member));
  repo = await newRepo(apiUser(ts, owner), org, { vcs: 'git' });
  ownerApi = ts.anon.as(owner.token);
  memberApi = ts.anon.as(member.token);
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

/** A signed-in page of `user` (script on unless told). */
async function as(user: WebUser, javaScript = true): Promise<Watched> {
  const w = await watchedPage(browser, { javaScript });
  await signIn(w, ts.url, user);
  return w;
}

async function issueLabels(n: number): Promise<string[]> {
  return (await ts.anon.get(`${repo.api}/issues/${n}`)).body.data.labels.map((l: any) => l.name);
}

async function newIssue(labels: string[]): Promise<number> {
  const r = await memberApi.post(`${repo.api}/issues`, { title: `with ${labels.join(', ')}`, labels });
  expect(r.status).toBe(201);
  return r.body.data.number;
}

/**
 * On a label list: creates a label with the form, renames and recolours it on its page, then
 * deletes it, the confirmation saying how many issues carry it (`uses`, each made by `use`).
 */
async function lifecycle(w: Watched, names: [string, string], use: () => Promise<number[]>): Promise<void> {
  const [first, renamed] = names;
  await fillLabel(w, { name: first, color: '#fbca04', description: `about ${first}` });
  expect((await submit(w, 'Create label')).status()).toBe(303);
  await expect(w.page.getByRole('status').textContent()).resolves.toBe('The label was created.');
  expect(await labelRow(w, first).locator('td').first().textContent()).toBe(`about ${first}`);
  const issues = await use();
  await w.page.reload();
  const count = issues.length === 1 ? '1 issue' : issues.length === 0 ? 'none' : `${issues.length} issues`;
  expect(await labelRow(w, first).textContent()).toContain(count);

  await labelRow(w, first)
    .getByRole('link', { name: `Edit ${first}` })
    .click();
  await checkPage(w, (await w.page.reload())!);
  expect(await w.page.getByLabel('Colour', { exact: true }).inputValue()).toBe('#fbca04');
  await fillLabel(w, { name: renamed, color: '#5319e7' });
  expect((await submit(w, 'Save label')).status()).toBe(303);
  await expect(w.page.getByRole('status').textContent()).resolves.toContain('The label was saved.');
  expect(await labelRow(w, renamed).locator('svg rect').getAttribute('fill')).toBe('#5319e7');
  expect(await labelRow(w, first).count()).toBe(0);
  for (const n of issues) expect(await issueLabels(n)).toContain(renamed);
  await expectChipContrast(w);

  await labelRow(w, renamed)
    .getByRole('link', { name: `Delete ${renamed}` })
    .click();
  const confirm = (await w.page.reload())!;
  await checkPage(w, confirm);
  const said =
    issues.length === 0
      ? 'No issue carries it.'
      : `${count} ${issues.length === 1 ? 'carries' : 'carry'} it and will lose it.`;
  expect(await w.page.locator('main').textContent()).toContain(said);
  expect((await submit(w, 'Delete label')).status()).toBe(303);
  await expect(w.page.getByRole('status').textContent()).resolves.toBe(
    issues.length === 0 ? 'The label was deleted.' : `The label was deleted and taken off ${count}.`,
  );
  expect(await labelRow(w, renamed).count()).toBe(0);
  for (const n of issues) expect(await issueLabels(n)).not.toContain(renamed);
}

describe('managing labels', () => {
  test('when a site administrator opens the administration from the account menu, then site labels are created, renamed, recoloured and deleted', async () => {
    const w = await as(admin);
    await w.page.locator('summary', { hasText: admin.username }).click();
    await Promise.all([
      w.page.waitForURL(`${ts.url}/-/admin`),
      w.page.getByRole('link', { name: 'Administration' }).click(),
    ]);
    await checkPage(w, (await w.page.reload())!);
    await w.page.getByRole('link', { name: 'Labels', exact: true }).first().click();
    await w.page.waitForURL(`${ts.url}/-/admin/labels`);
    await checkPage(w, (await w.page.reload())!);
    await lifecycle(w, ['site-triage', 'site-needs-triage'], async () => [await newIssue(['site-triage'])]);
    await w.context.close();
  });

  test('when an organization owner opens Labels from the organization page, then its labels are created, renamed, recoloured and deleted', async () => {
    const w = await as(owner);
    await visit(w, `${ts.url}/${org}`);
    await w.page.locator('.actions').getByRole('link', { name: 'Labels' }).click();
    await w.page.waitForURL(`${ts.url}/${org}/-/labels`);
    await checkPage(w, (await w.page.reload())!);
    await lifecycle(w, ['team-a', 'team-alpha'], () => Promise.resolve([]));
    await w.context.close();
  });

  test('when a repository owner opens its labels, then the merged catalog shows scopes and shadows, and repository labels are managed there', async () => {
    expect(
      (await ts.admin.post('/api/v1/admin/labels', { name: 'help wanted', color: '#008672' })).status,
    ).toBe(201);
    expect(
      (
        await ownerApi.post(`/api/v1/orgs/${org}/labels`, {
          name: 'priority',
          color: '#b60205',
          description: 'of the org',
        })
      ).status,
    ).toBe(201);
    const w = await as(owner);
    await visit(w, `${ts.url}/${org}/${repo.name}/-/refs`);
    await w.page
      .getByRole('navigation', { name: 'Repository' })
      .getByRole('link', { name: 'Labels' })
      .click();
    await w.page.waitForURL(`${ts.url}/${org}/${repo.name}/-/labels`);
    expect(await labelRow(w, 'help wanted').textContent()).toContain('Site');
    expect(await labelRow(w, 'priority').textContent()).toContain('Organization');
    expect(
      await labelRow(w, 'priority')
        .getByRole('link', { name: 'Manage priority on the organization page' })
        .getAttribute('href'),
    ).toBe(`/${org}/-/labels`);
    expect(await w.page.getByRole('link', { name: `Labels of ${org}` }).getAttribute('href')).toBe(
      `/${org}/-/labels`,
    );

    // a repository label of the organization label's name takes its place here
    await fillLabel(w, { name: 'Priority', color: '#ffffff', description: 'ours' });
    expect((await submit(w, 'Create label')).status()).toBe(303);
    const row = labelRow(w, 'Priority');
    expect(await row.textContent()).toContain('Repository');
    expect(await row.textContent()).toContain('shadows the organization label of this name');
    expect(await labelRow(w, 'priority').count()).toBe(0);
    await checkPage(w, (await w.page.reload())!);
    expect(await expectChipContrast(w)).toEqual(
      expect.arrayContaining(['Priority: #ffffff', 'help wanted: #008672']),
    );
    await screenshot(w, 'repo-labels');

    const lost: number[] = [];
    await lifecycle(w, ['regression', 'regressed'], async () => {
      lost.push(await newIssue(['regression', 'help wanted']), await newIssue(['regression']));
      return lost;
    });
    // the issues keep their other labels
    expect(await issueLabels(lost[0]!)).toEqual(['help wanted']);
    expect(await issueLabels(lost[1]!)).toEqual([]);
    await w.context.close();
  });
});

describe('who sees what', () => {
  test('when a member looks, then the merged catalog has no forms, and a form posted anyway is refused (403)', async () => {
    const w = await as(member);
    const list = `${ts.url}/${org}/${repo.name}/-/labels`;
    const res = await visit(w, list);
    await checkPage(w, res);
    expect(await labelRow(w, 'help wanted').count()).toBe(1);
    expect(await w.page.locator('main form').count()).toBe(0);
    expect(
      await w.page
        .locator('main')
        .getByRole('link', { name: /Edit|Delete|Manage|Labels of/ })
        .count(),
    ).toBe(0);
    expect(await w.page.locator('nav.tabs').getByRole('link', { name: 'Settings' }).count()).toBe(0);

    const token = await w.page.locator('input[name="_csrf"]').first().inputValue();
    const cookie = (await w.context.cookies(ts.url)).find((k) => k.name === 'triad_session')!;
    const post = (path: string, fields: Record<string, string>) =>
      fetch(`${ts.url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          cookie: `triad_session=${cookie.value}`,
          'content-type': 'application/x-www-form-urlencoded',
          'sec-fetch-site': 'same-origin',
        },
        body: new URLSearchParams({ _csrf: token, ...fields }).toString(),
      });
    const forged = await post(`/${org}/${repo.name}/-/labels`, { name: 'mine', color: '#000000' });
    expect(forged.status).toBe(403);
    expect(await forged.text()).toContain('organization owner required');
    const own = (await ts.anon.get(`${repo.api}/issues/labels`)).body.data.find(
      (l: any) => l.name === 'Priority',
    );
    expect((await post(`/${org}/${repo.name}/-/labels/${own.id}/delete`, {})).status).toBe(403);
    await visit(w, `${list}/${own.id}`, 403);
    await visit(w, `${ts.url}/${org}/-/labels`, 403);
    await visit(w, `${ts.url}/-/admin/labels`, 403);
    expect((await ts.anon.get(`${repo.api}/issues/labels`)).body.data.map((l: any) => l.name)).not.toContain(
      'mine',
    );
    await w.context.close();
  });

  test('when script is off, then the catalog reads the same, signed out too, and an owner still deletes through the confirmation', async () => {
    const anon = await watchedPage(browser, { javaScript: false });
    await visit(anon, `${ts.url}/${org}/${repo.name}/-/labels`);
    expect(await labelRow(anon, 'Priority').textContent()).toContain('shadows the organization label');
    expect(await anon.page.locator('main form').count()).toBe(0);
    await anon.context.close();

    const w = await as(owner, false);
    await visit(w, `${ts.url}/${org}/${repo.name}/-/labels`);
    await fillLabel(w, { name: 'no-script', color: '#0e8a16' });
    expect((await submit(w, 'Create label')).status()).toBe(303);
    await labelRow(w, 'no-script').getByRole('link', { name: 'Delete no-script' }).click();
    await w.page.waitForURL(/\/delete$/);
    expect((await submit(w, 'Delete label')).status()).toBe(303);
    expect(await labelRow(w, 'no-script').count()).toBe(0);
    await w.context.close();
  });
});

describe('markup in labels', () => {
  const SITE = '<img src=x onerror=alert(1)>';
  const ORG = '"><svg onload=alert(1)>';
  const REPO = '</table><i onmouseover=alert(1)>x';
  const DESC = '<script>alert(1)</script>';

  test('names and descriptions with markup show as text on every label page', async () => {
    const made = [
      await ts.admin.post('/api/v1/admin/labels', { name: SITE, color: '#000000', description: DESC }),
      await ownerApi.post(`/api/v1/orgs/${org}/labels`, { name: ORG, color: '#777777', description: DESC }),
      await ownerApi.post(`${repo.api}/labels`, { name: REPO, color: '#7f7f7f', description: DESC }),
    ];
    expect(made.map((r) => r.status)).toEqual([201, 201, 201]);
    const [site, orgLabel, repoLabel] = made.map((r) => r.body.data.id as number);
    const w = await as(admin);
    const pages: [string, string][] = [
      ['/-/admin/labels', SITE],
      [`/-/admin/labels/${site}`, SITE],
      [`/-/admin/labels/${site}/delete`, SITE],
      [`/${org}/-/labels`, ORG],
      [`/${org}/-/labels/${orgLabel}`, ORG],
      [`/${org}/${repo.name}/-/labels`, REPO],
      [`/${org}/${repo.name}/-/labels/${repoLabel}/delete`, REPO],
    ];
    for (const [path, name] of pages) {
      const res = await visit(w, `${ts.url}${path}`);
      expect(await w.page.locator('.label-chip').getByText(name, { exact: true }).count()).toBeGreaterThan(0);
      if (path.endsWith('/labels')) expect(await w.page.locator('main').textContent()).toContain(DESC);
      await expectInert(w);
      await expectChipContrast(w);
      if (path === `/${org}/${repo.name}/-/labels`) await checkPage(w, res);
    }
    // what was typed comes back as text in a refused form too (a name the organization has)
    expect(
      (await ownerApi.post(`/api/v1/orgs/${org}/labels`, { name: 'taken', color: '#123456' })).status,
    ).toBe(201);
    await visit(w, `${ts.url}/${org}/-/labels/${orgLabel}`);
    await fillLabel(w, { name: 'taken', color: '#123456', description: ORG });
    expect((await submit(w, 'Save label')).status()).toBe(409);
    expect(await w.page.getByLabel('Description', { exact: true }).inputValue()).toBe(ORG);
    await expectInert(w);
    await w.context.close();
  });
});
