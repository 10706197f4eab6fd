/**
 * The head of an organization's sub-pages (members, labels, webhooks): its name and the tabs of
 * its sections. The labels and webhooks tabs are shown to owners only, as only they may use them.
 */
import type { Role } from '../../domain/access.ts';
import { html, type Html } from '../html.ts';
import { urls } from '../urls.ts';

export type OrgTab = 'repos' | 'members' | 'labels' | 'webhooks';

export function orgHeader(org: string, role: Role | undefined, current: OrgTab): Html {
  const tabs: { key: OrgTab; href: string; label: string }[] = [
    { key: 'repos', href: urls.org(org), label: 'Repositories' },
    { key: 'members', href: urls.orgMembers(org), label: 'Members' },
  ];
  if (role === 'owner') {
    tabs.push({ key: 'labels', href: urls.orgLabels(org), label: 'Labels' });
    tabs.push({ key: 'webhooks', href: urls.orgWebhooks(org), label: 'Webhooks' });
  }
  return html`<header class="repo-head">
<p class="repo-title"><a href="${urls.org(org)}"><strong>${org}</strong></a></p>
<nav class="tabs" aria-label="Organization">
<ul>${tabs.map((t) => html`<li><a href="${t.href}"${t.key === current ? html` aria-current="page"` : ''}>${t.label}</a></li>`)}</ul>
</nav>
</header>`;
}
