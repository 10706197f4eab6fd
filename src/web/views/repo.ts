/**
 * The head of every repository page: its name (organization / repository), kind and visibility,
 * and the tabs of its sections. A tab the viewer may not use is not shown.
 */
import { html, type Html } from '../html.ts';
import type { RepoPage } from '../repo-page.ts';
import { urls } from '../urls.ts';
import { kindBadge, privateBadge } from './common.ts';

export type RepoTab = 'code' | 'log' | 'issues' | 'pulls' | 'pipelines' | 'releases' | 'labels' | 'settings';

export function repoHeader(p: RepoPage, current: RepoTab | undefined): Html {
  const { repo } = p;
  const tabs: { key: RepoTab; href: string; label: string }[] = [
    { key: 'code', href: urls.repo(repo.org, repo.name), label: 'Code' },
    { key: 'log', href: urls.log(repo.org, repo.name), label: 'History' },
    { key: 'issues', href: urls.issues(repo.org, repo.name), label: 'Issues' },
    { key: 'pulls', href: urls.pulls(repo.org, repo.name), label: 'Pull requests' },
    { key: 'pipelines', href: urls.pipelines(repo.org, repo.name), label: 'Pipelines' },
    { key: 'releases', href: urls.releases(repo.org, repo.name), label: 'Releases' },
    { key: 'labels', href: urls.labels(repo.org, repo.name), label: 'Labels' },
  ];
  if (p.role === 'owner')
    tabs.push({ key: 'settings', href: urls.settings(repo.org, repo.name), label: 'Settings' });
  return html`<header class="repo-head">
<p class="repo-title"><a href="${urls.org(repo.org)}">${repo.org}</a> / <a href="${urls.repo(repo.org, repo.name)}"><strong>${repo.name}</strong></a> ${kindBadge(repo.vcs)} ${privateBadge(repo.is_private)}</p>
<nav class="tabs" aria-label="Repository">
<ul>${tabs.map((t) => html`<li><a href="${t.href}"${t.key === current ? html` aria-current="page"` : ''}>${t.label}</a></li>`)}</ul>
</nav>
</header>`;
}
