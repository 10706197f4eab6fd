/** The history of a line (`/-/log`, `/-/log/:rev`): 50 commits a page, newest first. */
import type { LogEntry } from '../../../vcs/reader.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { html, type Html } from '../../html.ts';
import { loadRepo } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { pageParam, pager, timeAgo } from '../../views/common.ts';
import { repoHeader } from '../../views/repo.ts';
import { refSwitcher } from '../../views/code/refs.ts';
import { commitOf, refLists, type CodeDeps } from './common.ts';
import { ApiError } from '../../../http/errors.ts';

const PER_PAGE = 50;

export function logPages(w: WebRouter, d: CodeDeps): void {
  w.get('/:org/:repo/-/log', (ctx) => logPage(ctx, d));
  // (a branch with `/` typed by hand arrives as several segments: they are the revision)
  w.get('/:org/:repo/-/log/*rev', (ctx) => logPage(ctx, d));
}

/** Branch and tag badges of a commit. */
export function refBadges(c: Pick<LogEntry, 'branch' | 'tags'>): Html {
  const branch = c.branch === '' ? '' : html`<span class="badge branch" title="Branch">${c.branch}</span>`;
  return html`${branch}${c.tags.map((t) => html` <span class="badge tag" title="Tag">${t}</span>`)}`;
}

function commitRow(org: string, repo: string, c: LogEntry): Html {
  const href = urls.changeset(org, repo, c.id);
  return html`<li class="commit">
<div class="commit-main">
<p class="subject"><a href="${href}">${c.subject === '' ? '(no message)' : c.subject}</a> ${refBadges(c)}</p>
<p class="meta"><span class="author">${c.author}</span> committed ${timeAgo(c.date)}</p>
</div>
<div class="commit-side">
<a class="sha" href="${href}" aria-label="Changeset ${c.short_id}">${c.short_id}</a>
<a href="${urls.tree(org, repo, c.id)}" aria-label="Browse files at ${c.short_id}">Browse</a>
</div>
</li>`;
}

async function logPage(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos);
  const { repo } = p;
  const rev = ctx.params.rev ?? repo.default_branch;
  const page = pageParam(ctx.query.page);
  const commit = await commitOf(d, p, rev);
  const [log, refs] = await Promise.all([
    commit === undefined
      ? d.contents.log(p.target, { rev: 'tip', page: 1, per_page: 1 }).then((l) => {
          // no such revision, unless the repository is empty (then its history is empty)
          if (l.total > 0 || ctx.params.rev !== undefined) throw ApiError.notFound('revision');
          return l;
        })
      : d.contents.log(p.target, { rev: commit, page, per_page: PER_PAGE }),
    refLists(d, p),
  ]);
  const switcher = refSwitcher(repo.org, repo.name, refs, rev, (r) => urls.log(repo.org, repo.name, r));
  const list =
    log.items.length === 0
      ? html`<p class="empty">${log.total === 0 ? 'No commits yet.' : 'No commits on this page.'}</p>`
      : html`<ol class="commits">${log.items.map((c) => commitRow(repo.org, repo.name, c))}</ol>`;
  return web.page(
    `History of ${rev} · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'log')}
<div class="heading-row"><h1>History of <span class="rev">${rev}</span></h1><span class="muted">${log.total} ${log.total === 1 ? 'commit' : 'commits'}</span></div>
<div class="code-bar">${switcher}</div>
${list}
${pager(ctx.path, page, PER_PAGE, log.total)}`,
    { scripts: ['refs'], wide: true },
  );
}
