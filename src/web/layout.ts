/**
 * The page shell every page is rendered into: head (stylesheet, icon, the page's script islands),
 * a skip link, the top bar (site navigation, the account menu or sign-in), the main content and
 * the footer. Nothing in it needs script: the account menu is a `<details>` element.
 */
import { assets } from './assets.ts';
import { html, type Html, type Renderable } from './html.ts';
import type { Viewer } from './context.ts';

export type PageOptions = {
  /** Script islands the page uses (`islands/<name>.ts`). */
  scripts?: readonly string[];
  /** Wider main column (code, diffs). */
  wide?: boolean;
};

/** A same-origin path + query to come back to after signing in (`/` for anything else). */
export function safeReturn(to: unknown): string {
  if (typeof to !== 'string' || !to.startsWith('/') || to.startsWith('//') || to.startsWith('/\\'))
    return '/';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(to) || to.length > 2000) return '/';
  return to;
}

export function loginUrl(returnTo: string): string {
  return returnTo === '/' ? '/-/login' : `/-/login?return_to=${encodeURIComponent(returnTo)}`;
}

function accountMenu(v: Viewer): Html {
  if (v.user === undefined) {
    const here = v.path.startsWith('/-/login') ? '/' : v.path;
    return html`<a class="button" href="${loginUrl(here)}">Sign in</a>`;
  }
  const u = v.user;
  return html`<a class="button subtle" href="/-/new/repo">New repository</a>
<details class="menu">
<summary aria-label="Account menu of ${u.username}">${u.username}</summary>
<ul class="menu-items">
<li><a href="/-/users/${encodeURIComponent(u.username)}">Profile</a></li>
<li><a href="/-/new/org">New organization</a></li>
<li><a href="/-/settings/tokens">Access tokens</a></li>
<li><a href="/-/settings/sessions">Sessions</a></li>
<li><a href="/-/settings/password">Password</a></li>
${u.isAdmin ? html`<li><a href="/-/admin">Administration</a></li>` : ''}
<li><form method="post" action="/-/logout"><input type="hidden" name="_csrf" value="${v.formToken ?? ''}"><button type="submit" class="link">Sign out</button></form></li>
</ul>
</details>`;
}

export function layout(v: Viewer, title: string, body: Renderable, opts: PageOptions = {}): Html {
  const a = assets();
  const scripts = (opts.scripts ?? []).map(
    (s) => html`<script type="module" src="${a.url(`${s}.js`)}"></script>`,
  );
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Triad</title>
<link rel="stylesheet" href="${a.url('triad.css')}">
<link rel="icon" type="image/svg+xml" href="${a.url('icon.svg')}">
${scripts}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<nav class="site" aria-label="Site">
<a class="brand" href="/"><img src="${a.url('icon.svg')}" alt="" width="24" height="24"> Triad</a>
<a href="/-/explore">Explore</a>
</nav>
<div class="account">${accountMenu(v)}</div>
</header>
<main id="main"${opts.wide === true ? html` class="wide"` : ''} tabindex="-1">
${body}
</main>
<footer class="bottom"><p>Triad · Mercurial, Git and Fossil hosting</p></footer>
</body>
</html>
`;
}
