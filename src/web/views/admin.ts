/**
 * The head of the site administration's pages (`/-/admin`, for site administrators): its title
 * and the tabs of its sections.
 */
import { html, type Html, type Renderable } from '../html.ts';
import { urls } from '../urls.ts';

export type AdminTab = 'overview' | 'labels';

export function adminFrame(current: AdminTab, body: Renderable): Html {
  const tabs: { key: AdminTab; href: string; label: string }[] = [
    { key: 'overview', href: urls.admin, label: 'Overview' },
    { key: 'labels', href: urls.adminLabels, label: 'Labels' },
  ];
  return html`<header class="repo-head">
<p class="repo-title"><a href="${urls.admin}"><strong>Site administration</strong></a></p>
<nav class="tabs" aria-label="Administration">
<ul>${tabs.map((t) => html`<li><a href="${t.href}"${t.key === current ? html` aria-current="page"` : ''}>${t.label}</a></li>`)}</ul>
</nav>
</header>
${body}`;
}
