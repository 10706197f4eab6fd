/** Small views shared by pages: times, badges, repository lists, paging. */
import { html, type Html, type Renderable } from '../html.ts';
import { urls } from '../urls.ts';

const UNITS: [number, string][] = [
  [365 * 86_400, 'year'],
  [30 * 86_400, 'month'],
  [7 * 86_400, 'week'],
  [86_400, 'day'],
  [3_600, 'hour'],
  [60, 'minute'],
];

/** "3 hours ago", with the exact time as a tooltip and in `datetime`. */
export function timeAgo(iso: string | null | undefined, now = Date.now()): Html {
  if (iso === null || iso === undefined || iso === '') return html`<span class="muted">never</span>`;
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return html`<span>${iso}</span>`;
  const s = Math.round((now - t) / 1000);
  const abs = Math.abs(s);
  let text = 'just now';
  for (const [secs, unit] of UNITS) {
    if (abs >= secs) {
      const n = Math.floor(abs / secs);
      const u = `${n} ${unit}${n === 1 ? '' : 's'}`;
      text = s >= 0 ? `${u} ago` : `in ${u}`;
      break;
    }
  }
  const at = new Date(t).toISOString();
  return html`<time datetime="${at}" title="${at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}">${text}</time>`;
}

const KIND_LABEL: Record<string, string> = { git: 'Git', hg: 'Mercurial', fossil: 'Fossil' };

export function kindLabel(vcs: string): string {
  return KIND_LABEL[vcs] ?? vcs;
}

export function kindBadge(vcs: string): Html {
  return html`<span class="badge kind-${vcs}">${kindLabel(vcs)}</span>`;
}

export function privateBadge(isPrivate: boolean): Html {
  return isPrivate ? html`<span class="badge private">Private</span>` : html``;
}

export type RepoListItem = {
  org: string;
  name: string;
  description: string;
  vcs: string;
  is_private: boolean;
  pushed_at?: string | null;
};

/** A list of repositories, or `empty` when there are none. */
export function repoList(items: readonly RepoListItem[], empty: Renderable): Html {
  if (items.length === 0) return html`<p class="empty">${empty}</p>`;
  const item = (r: RepoListItem) => {
    const pushed =
      r.pushed_at === undefined
        ? ''
        : html`<p class="meta">${r.pushed_at === null ? 'No pushes yet' : html`Updated ${timeAgo(r.pushed_at)}`}</p>`;
    return html`<li>
<div class="repo-line"><a class="repo-name" href="${urls.repo(r.org, r.name)}">${r.org}/${r.name}</a> ${kindBadge(r.vcs)} ${privateBadge(r.is_private)}</div>
${r.description === '' ? '' : html`<p class="description">${r.description}</p>`}
${pushed}
</li>`;
  };
  return html`<ul class="repo-list">${items.map(item)}</ul>`;
}

/** Previous / next links of a paged list (`page` is 1-based); nothing when one page holds all. */
export function pager(base: string, page: number, perPage: number, total: number, param = 'page'): Html {
  const last = Math.max(1, Math.ceil(total / perPage));
  if (last <= 1 && page <= 1) return html``;
  const at = (p: number) => {
    const u = new URL(base, 'http://x');
    if (p === 1) u.searchParams.delete(param);
    else u.searchParams.set(param, String(p));
    return `${u.pathname}${u.search}`;
  };
  const prev =
    page > 1
      ? html`<a href="${at(page - 1)}" rel="prev">Previous</a>`
      : html`<span class="disabled">Previous</span>`;
  const next =
    page < last
      ? html`<a href="${at(page + 1)}" rel="next">Next</a>`
      : html`<span class="disabled">Next</span>`;
  return html`<nav class="pager" aria-label="Pages">${prev}<span>Page ${page} of ${last}</span>${next}</nav>`;
}

/** A page number from the query (1 for anything that is not a positive whole number). */
export function pageParam(v: string | undefined): number {
  const n = v !== undefined && /^\d{1,6}$/.test(v) ? Number(v) : 1;
  return n >= 1 ? n : 1;
}
