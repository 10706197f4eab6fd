/**
 * A real browser for the web interface's tests: Debian's `chromium` driven by `playwright-core`
 * (nothing is downloaded). `openBrowser` starts one per test file; each test takes its own
 * contexts (a context is a browser profile: its own cookies). `Watched` pages record what must
 * never happen (a CSP violation, a dialog from injected script, an uncaught error), and
 * `checkPage` asserts the rules every page keeps: the CSP header, no violation, no serious or
 * critical axe finding, every control reachable with the keyboard.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { expect } from '@jest/globals';
import { chromium, type Browser, type BrowserContext, type Page, type Response } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import type { TestServer } from './server.ts';
import { uniq } from './server.ts';
import { ROOT } from './process.ts';

export const CHROMIUM = process.env.TRIAD_CHROMIUM ?? '/usr/bin/chromium';

export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** One headless Chromium (no sandbox as root; no background traffic off loopback). */
export async function openBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

/** What a watched page saw that a page of Triad must never cause. */
export type Incidents = { violations: string[]; dialogs: string[]; errors: string[] };

export type Watched = { page: Page; context: BrowserContext; incidents: Incidents };

/**
 * A new context and page that records CSP violations (`securitypolicyviolation` events and the
 * console's "Refused to ..." reports), dialogs (alert, confirm, prompt: dismissed) and uncaught
 * errors. `javaScript: false` opens a context with script disabled.
 */
export async function watchedPage(browser: Browser, opts: { javaScript?: boolean } = {}): Promise<Watched> {
  const context = await browser.newContext({
    javaScriptEnabled: opts.javaScript !== false,
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  const incidents: Incidents = { violations: [], dialogs: [], errors: [] };
  await context.exposeBinding('__triadViolation', (_src, text: string) => {
    incidents.violations.push(text);
  });
  await context.addInitScript(() => {
    const g = globalThis as any;
    g.document.addEventListener('securitypolicyviolation', (e: any) => {
      g.__triadViolation(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text()))
      incidents.violations.push(m.text());
  });
  page.on('dialog', (d) => {
    incidents.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss().catch(() => undefined);
  });
  page.on('pageerror', (e) => incidents.errors.push(e.message));
  return { page, context, incidents };
}

/** Opens `url` and expects the status (200 by default); answers the response. */
export async function visit(w: Watched, url: string, status = 200): Promise<Response> {
  const res = await w.page.goto(url, { waitUntil: 'load' });
  if (res === null) throw new Error(`no response for ${url}`);
  expect({ url, status: res.status() }).toEqual({ url, status });
  return res;
}

/**
 * The rules every page keeps, checked on the page `w` shows now (`res`: its response):
 * the CSP header and the other security headers, no CSP violation, no uncaught error, no dialog,
 * no serious or critical axe finding, and every visible control reachable with Tab.
 */
export async function checkPage(w: Watched, res: Response, opts: { keyboard?: boolean } = {}): Promise<void> {
  const headers = res.headers();
  expect(headers['content-security-policy']).toBe(CSP);
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers['referrer-policy']).toBe('same-origin');
  await w.page.waitForLoadState('load');
  const axe = await new AxeBuilder({ page: w.page }).analyze();
  const serious = axe.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  expect({ url: w.page.url(), axe: serious }).toEqual({ url: w.page.url(), axe: [] });
  if (opts.keyboard !== false) await expectKeyboardReach(w.page);
  expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
}

/** Every visible link, button and form control is focused at some point by pressing Tab. */
export async function expectKeyboardReach(page: Page): Promise<void> {
  // (browser-side code refers to the page's globals through `globalThis`: the tests compile without DOM types)
  const total = await page.evaluate(() => {
    const doc = (globalThis as any).document;
    const sel =
      'a[href], button, input:not([type="hidden"]), select, textarea, summary, [tabindex]:not([tabindex="-1"])';
    let n = 0;
    for (const el of doc.querySelectorAll(sel)) {
      // (a radio group is one Tab stop, its checked button or else its first; arrows move within it)
      const group =
        el.type === 'radio' && el.name !== '' && el.form !== null
          ? el.form.querySelectorAll(`input[type="radio"][name="${el.name}"]`)
          : [];
      const checked = [...group].find((r: any) => r.checked);
      const stop = group.length === 0 || el === (checked ?? group[0]);
      // (the items of a closed <details> are not visible: its summary is the control)
      const visible = stop && el.checkVisibility({ checkVisibilityCSS: true, contentVisibilityAuto: true });
      if (visible && el.disabled !== true) el.dataset.kbd = String(n++);
      else delete el.dataset.kbd;
    }
    return n;
  });
  // (a big page is checked on its first 400 controls: the same templates repeat below)
  const want = Math.min(total, 400);
  await page.evaluate(() => (globalThis as any).document.activeElement?.blur());
  const seen = new Set<string>();
  for (let i = 0; i < want * 2 + 5 && seen.size < want; i++) {
    await page.keyboard.press('Tab');
    const k = await page.evaluate(
      () => (globalThis as any).document.activeElement?.dataset?.kbd as string | undefined,
    );
    if (k !== undefined && Number(k) < want) seen.add(k);
  }
  const missed = await page.evaluate(
    (seenList: string[]) => {
      const els = [...(globalThis as any).document.querySelectorAll('[data-kbd]')];
      return els
        .filter((el) => Number(el.dataset.kbd) < 400 && !seenList.includes(el.dataset.kbd))
        .map(
          (el) =>
            `${String(el.tagName).toLowerCase()} ${String(el.textContent ?? '')
              .trim()
              .slice(0, 40)}`,
        );
    },
    [...seen],
  );
  expect({ url: page.url(), unreachable: missed }).toEqual({ url: page.url(), unreachable: [] });
}

/**
 * No element was made of hostile markup shown on the page: no script in main, no `img[src=x]`,
 * no `svg`, no `i[onmouseover]`, no inline handler, no javascript:, vbscript: or data: link; and
 * nothing ran (no dialog, no CSP violation, no page error).
 */
export async function expectInert(w: Watched): Promise<void> {
  const made = await w.page.evaluate(() => {
    const doc = (globalThis as any).document;
    return {
      scripts: doc.querySelectorAll('main script').length,
      img: doc.querySelectorAll('img[src="x"], svg, i[onmouseover]').length,
      handlers: [...doc.querySelectorAll('main *')].filter((el: any) =>
        [...el.attributes].some((a: any) => a.name.startsWith('on')),
      ).length,
      jsLinks: doc.querySelectorAll('a[href^="javascript"], a[href^="vbscript"], a[href^="data"]').length,
    };
  });
  expect({ url: w.page.url(), ...made }).toEqual({
    url: w.page.url(),
    scripts: 0,
    img: 0,
    handlers: 0,
    jsLinks: 0,
  });
  expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
}

/** A user with a password (through the admin API), for signing in. */
export type WebUser = { username: string; password: string; token: string };

export async function webUser(
  ts: TestServer,
  username = uniq('user'),
  opts: { admin?: boolean } = {},
): Promise<WebUser> {
  const u = await ts.newUser(username, opts);
  const password = `pw-${uniq('p')}`;
  const r = await ts.admin.patch(`/api/v1/admin/users/${username}`, { password });
  if (r.status !== 200) throw new Error(`webUser: ${r.status} ${r.text}`);
  return { username, password, token: u.token };
}

/** Signs in through the sign-in form; the page ends on where it was sent back to. */
export async function signIn(w: Watched, base: string, user: WebUser, returnTo?: string): Promise<void> {
  const url =
    returnTo === undefined ? `${base}/-/login` : `${base}/-/login?return_to=${encodeURIComponent(returnTo)}`;
  await w.page.goto(url);
  await w.page.getByLabel('Username or e-mail address').fill(user.username);
  await w.page.getByLabel('Password').fill(user.password);
  await Promise.all([
    w.page.waitForURL((u) => !u.pathname.startsWith('/-/login')),
    w.page.getByRole('button', { name: 'Sign in' }).click(),
  ]);
}

/**
 * Saves a screenshot of the page as `docs/screenshots/<name>.png` when `TRIAD_SCREENSHOTS=1`
 * (`npm run screenshots`); otherwise nothing, so a test run changes no file of the repository.
 */
export async function screenshot(w: Watched, name: string): Promise<void> {
  if (process.env.TRIAD_SCREENSHOTS !== '1') return;
  const dir = path.join(ROOT, 'docs', 'screenshots');
  await fs.mkdir(dir, { recursive: true });
  // (without the focus ring a keyboard check left on some control)
  await w.page.evaluate(() => (globalThis as any).document.activeElement?.blur());
  await w.page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: false });
}
