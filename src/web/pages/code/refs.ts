/** All refs of a repository (`/-/refs`): branches, bookmarks (Mercurial) and tags, each list paged on its own. */
import type { Page } from '../../../http/pagination.ts';
import type { RefEntry, RefType } from '../../../vcs/reader.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { html, type Html } from '../../html.ts';
import { loadRepo } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { pageParam, pager, timeAgo } from '../../views/common.ts';
import { repoHeader } from '../../views/repo.ts';
import type { CodeDeps } from './common.ts';

const PER_PAGE = 50;

const KINDS: { type: RefType; label: string; param: string }[] = [
  { type: 'branch', label: 'Branches', param: 'branches' },
  { type: 'bookmark', label: 'Bookmarks', param: 'bookmarks' },
  { type: 'tag', label: 'Tags', param: 'tags' },
];

export function refsPages(w: WebRouter, d: CodeDeps): void {
  w.get('/:org/:repo/-/refs', (ctx) => refsPage(ctx, d));
}

function refTable(org: string, repo: string, list: Page<RefEntry>, label: string): Html {
  if (list.items.length === 0) return html`<p class="empty">No ${label.toLowerCase()}.</p>`;
  const rows = list.items.map(
    (r) => html`<tr>
<td><a href="${urls.tree(org, repo, r.name)}">${r.name}</a>${r.default ? html` <span class="badge">default</span>` : ''}</td>
<td><a class="sha" href="${urls.changeset(org, repo, r.commit.id)}">${r.commit.short_id}</a> ${r.commit.subject}</td>
<td>${timeAgo(r.commit.date)}</td>
<td><a href="${urls.log(org, repo, r.name)}" aria-label="History of ${r.name}">History</a></td>
</tr>`,
  );
  return html`<table class="list refs">
<thead><tr><th scope="col">Name</th><th scope="col">Commit</th><th scope="col">Date</th><th scope="col"><span class="visually-hidden">Links</span></th></tr></thead>
<tbody>${rows}</tbody>
</table>`;
}

async function refsPage(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos);
  const { repo } = p;
  const kinds = KINDS.filter((k) => k.type !== 'bookmark' || repo.vcs === 'hg');
  const lists = await Promise.all(
    kinds.map((k) =>
      d.refs.list(p.target, k.type, { page: pageParam(ctx.query[k.param]), per_page: PER_PAGE }),
    ),
  );
  const sections = kinds.map((k, i) => {
    const list = lists[i]!;
    return html`<section aria-labelledby="${k.param}-h">
<h2 id="${k.param}-h">${k.label} <span class="muted">(${list.total})</span></h2>
${refTable(repo.org, repo.name, list, k.label)}
${pager(ctx.path, list.page, PER_PAGE, list.total, k.param)}
</section>`;
  });
  return web.page(
    `Branches and tags · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'code')}
<h1>Branches and tags</h1>
${sections}`,
    { wide: true },
  );
}
