/**
 * Issue templates in a real browser, for Mercurial and Fossil repositories (pushed with `hg` and
 * `fossil`): a `config.yml` that turns blank issues off (no blank choice; a forced blank form is
 * refused with 422 and shown again), `.github` templates when `.triad` has none; and markup in
 * template names, abouts, titles, bodies and file names, label names, issue titles and comments
 * shown as text on every issue page (the XSS corpus of the issue pages).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, expectInert, openBrowser, visit, type Watched } from '../helpers/browser.ts';
import { submit } from './settings-helpers.ts';

import { browserOf, expectAlert, repoWith, team, template, textsOf, type Team } from './issues-fixture.ts';

const SCRIPT = '<script>alert(1)</script>';
const IMG = '<img src=x onerror=alert(1)>';
const SVG = '"><svg onload=alert(1)>';
const BAD_FILE = '<i onmouseover=alert(1)>.md';
const BODY = `# Report

${SCRIPT}
${IMG}
<a href="javascript:alert(1)">raw link</a>

[js link](javascript:alert(1)) [vb](vbscript:msgbox(1))
![ext](https://example.invalid/x.png)
`;

let browser: Browser;
let ts: TestServer;
let T: Team;
let hg: { base: string; api: string };
let wo: Watched;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  T = await team(ts);
  hg = await repoWith(ts, T, 'hg', {
    'README.md': '# hg\n',
    '.triad/ISSUE_TEMPLATE/report.md': template(
      { name: `${IMG} report`, about: SCRIPT, title: SVG, labels: [IMG, 'plain'] },
      BODY,
    ),
    [`.triad/ISSUE_TEMPLATE/${BAD_FILE}`]: `no front matter ${SCRIPT}\n`,
    '.triad/ISSUE_TEMPLATE/config.yml': 'blank_issues_enabled: false\n',
    '.github/ISSUE_TEMPLATE/other.md': template({ name: 'Not offered' }, 'x\n'),
  });
  const owner = ts.anon.as(T.owner.token);
  for (const name of [IMG, 'plain']) {
    expect(
      (await owner.post(`${hg.api.replace(/\/issues$/, '')}/labels`, { name, color: '#00aa00' })).status,
    ).toBe(201);
  }
  wo = await browserOf(browser, ts, T.owner);
});
afterAll(async () => {
  await wo?.context.close();
  await browser?.close();
  await ts?.close();
});

describe('issue templates and markup', () => {
  test('with blank issues off, the chooser has no blank choice and a forced blank form is refused with 422, then made from a template', async () => {
    const page = wo.page;
    const chooser = await visit(wo, `${hg.base}/new`);
    expect(await textsOf(wo, '.template-choice h2')).toEqual([`${IMG} report`]);
    expect(await page.getByRole('link', { name: 'Open a blank issue' }).count()).toBe(0);
    expect(await page.locator('.template-problems li').textContent()).toBe(
      `.triad/ISSUE_TEMPLATE/${BAD_FILE}: no front matter: the file must start with a --- line`,
    );
    await checkPage(wo, chooser);
    await expectInert(wo);
    await visit(wo, `${hg.base}/new?blank=1`);
    expect(await page.locator('.template-choice').count()).toBe(1);
    await visit(wo, `${hg.base}/new?template=nope.md`, 404);

    await visit(wo, `${hg.base}/new`);
    await page.getByRole('link', { name: `Get started with ${IMG} report` }).click();
    await page.waitForURL(/template=report\.md$/);
    expect(await page.getByLabel('Title', { exact: true }).inputValue()).toBe(SVG);
    expect(await page.getByLabel('Description', { exact: true }).inputValue()).toBe(BODY);
    expect(await page.getByLabel(IMG, { exact: true }).isChecked()).toBe(true);
    await expectInert(wo);
    await page.getByRole('button', { name: 'Preview', exact: true }).click();
    const preview = page.getByRole('region', { name: 'Preview of Description' });
    await expect(preview.locator('h1').textContent()).resolves.toBe('Report');
    expect(await preview.textContent()).toContain(SCRIPT);
    expect(await preview.locator('a.external-image').getAttribute('href')).toBe(
      'https://example.invalid/x.png',
    );
    await expectInert(wo);

    // the template field emptied by hand: refused, shown again with the text and a template choice
    await page.locator('input[name="template"]').evaluate((el: any) => (el.value = ''));
    await page.getByLabel('Title', { exact: true }).fill(`${SCRIPT} title`);
    const refused = await submit(wo, 'Create issue');
    expect(refused.status()).toBe(422);
    await expectAlert(wo, 'This repository opens issues from its templates only: choose one.');
    expect(await page.getByLabel('Title', { exact: true }).inputValue()).toBe(`${SCRIPT} title`);
    expect(await page.getByLabel(IMG, { exact: true }).isChecked()).toBe(true);
    await checkPage(wo, refused);
    await page.getByLabel('Template', { exact: true }).selectOption('report.md');
    expect((await submit(wo, 'Create issue')).status()).toBe(303);
    const issue = (await ts.anon.get(`${hg.api}/1`)).body.data;
    expect(issue).toMatchObject({ title: `${SCRIPT} title`, body: BODY });
    expect(issue.labels.map((l: any) => l.name).sort()).toEqual([IMG, 'plain'].sort());
  });

  test('markup in titles, bodies, labels and comments shows as text on the issue, the list and the pinned box', async () => {
    const page = wo.page;
    await visit(wo, `${hg.base}/1`);
    expect(await page.locator('h1.issue-title').textContent()).toContain(`${SCRIPT} title`);
    expect(await textsOf(wo, '.issue-side .label-chip')).toEqual([IMG, 'plain']);
    const body = page.locator('#issue-body .markdown');
    expect(await body.textContent()).toContain('<a href="javascript:alert(1)">raw link</a>');
    expect(await body.locator('a', { hasText: 'js link' }).count()).toBe(0);
    await page.getByLabel('Comment', { exact: true }).fill(`${IMG} and [x](javascript:alert(1)) ${SVG}`);
    expect((await submit(wo, 'Comment')).status()).toBe(303);
    expect(await page.locator('article.comment').last().textContent()).toContain(`${IMG} and`);
    expect((await submit(wo, 'Pin issue')).status()).toBe(303);
    expect((await submit(wo, `Remove the label ${IMG}`)).status()).toBe(303);
    await page.getByLabel('Label to add').selectOption(IMG);
    expect((await submit(wo, 'Add label')).status()).toBe(303);
    const detail = await page.reload();
    await checkPage(wo, detail!);
    await expectInert(wo);

    const list = await visit(wo, `${hg.base}?label=${encodeURIComponent(IMG)}`);
    expect(await textsOf(wo, '.pinned-list a')).toEqual([`${SCRIPT} title`]);
    expect(await textsOf(wo, '.issue-list .issue-link')).toEqual([`${SCRIPT} title`]);
    expect(await page.getByLabel('Label').inputValue()).toBe(IMG);
    await checkPage(wo, list);
    await expectInert(wo);
    await visit(wo, `${hg.base}?q=${encodeURIComponent(SVG)}&author=${encodeURIComponent(SCRIPT)}`);
    expect(await page.getByLabel('Title contains').inputValue()).toBe(SVG);
    await expectInert(wo);
  });

  test('.github templates of a Fossil repository are offered (beside the blank issue) when .triad has none', async () => {
    const fossil = await repoWith(ts, T, 'fossil', {
      'README.md': '# fossil\n',
      '.github/ISSUE_TEMPLATE/question.md': template(
        { name: 'Question', about: 'Ask away', assignees: `${T.member.username}, nobody-here` },
        'What did you try?\n',
      ),
    });
    const page = wo.page;
    await visit(wo, `${fossil.base}/new`);
    expect(await textsOf(wo, '.template-choice h2')).toEqual(['Question', 'Blank issue']);
    await page.getByRole('link', { name: 'Get started with Question' }).click();
    await page.waitForURL(/template=question\.md$/);
    expect(await page.getByLabel(T.member.username, { exact: true }).isChecked()).toBe(true);
    expect(await page.locator('main').textContent()).toContain(
      'names assignees this repository does not have, left out: nobody-here',
    );
    await page.getByLabel('Title', { exact: true }).fill('How?');
    expect((await submit(wo, 'Create issue')).status()).toBe(303);
    expect((await ts.anon.get(`${fossil.api}/1`)).body.data).toMatchObject({
      state: 'open',
      body: 'What did you try?\n',
      assignees: [{ username: T.member.username }],
    });
    await visit(wo, `${fossil.base}/new?blank=1`);
    expect(await page.getByLabel('Description', { exact: true }).inputValue()).toBe('');
  });
});
