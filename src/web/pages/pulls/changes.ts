/**
 * A pull request's commits (`/-/pulls/:number/commits`, oldest first, 50 a page) and files
 * (`/-/pulls/:number/files`): the diff from the merge base to its head, shown as a changeset's
 * (the first files inline, the others collapsed). A collapsed file is loaded by the `diff` island
 * from `/-/compare/:base...:head/fragment/<n>` or shown without script on its own page
 * `/-/compare/:base...:head/file/<n>`: both name the two commits, so they show the same file
 * however the pull request's refs move meanwhile.
 */
import { ApiError } from '../../../http/errors.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { html } from '../../html.ts';
import { loadRepo } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { pageParam, pager } from '../../views/common.ts';
import { diffNotes, fileBlock, fileBlocks, fileBody, fileList } from '../../views/code/diff.ts';
import { commitLine, pullHead } from '../../views/pulls.ts';
import { repoHeader } from '../../views/repo.ts';
import { safeReturn } from '../../layout.ts';
import { loadPull, type PullDeps } from './common.ts';

const PER_PAGE = 50;
const COMMIT_ID = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

export function pullChangesPages(w: WebRouter, d: PullDeps): void {
  w.get('/:org/:repo/-/pulls/:number/commits', (ctx) => commitsPage(ctx, d));
  w.get('/:org/:repo/-/pulls/:number/files', (ctx) => filesPage(ctx, d));
  w.get('/:org/:repo/-/compare/:base...:head/file/:n', (ctx) => oneFile(ctx, d, 'page'));
  w.get('/:org/:repo/-/compare/:base...:head/fragment/:n', (ctx) => oneFile(ctx, d, 'fragment'));
}

async function commitsPage(ctx: PageCtx, d: PullDeps): Promise<WebReply> {
  const { p, pull } = await loadPull(ctx, d);
  const { org, name } = p.repo;
  const page = pageParam(ctx.query.page);
  const list = await d.pulls.reads.commits(p.target, pull.number, { page, per_page: PER_PAGE });
  return web.page(
    `Commits · ${pull.title} · Pull request #${pull.number} · ${org}/${name}`,
    html`${repoHeader(p, 'pulls')}
${pullHead(org, name, pull, 'commits')}
<h2 class="visually-hidden">Commits</h2>
<p class="muted">${list.total} ${list.total === 1 ? 'commit' : 'commits'}, oldest first</p>
${list.items.length === 0 ? html`<p class="empty">No commits.</p>` : html`<ol class="commits">${list.items.map((c) => commitLine(org, name, c))}</ol>`}
${pager(ctx.path, page, PER_PAGE, list.total)}`,
    { wide: true },
  );
}

async function filesPage(ctx: PageCtx, d: PullDeps): Promise<WebReply> {
  const { p, pull } = await loadPull(ctx, d);
  const { org, name } = p.repo;
  const c = await d.pulls.reads.files(p.target, pull.number);
  const back = urls.pull(org, name, pull.number, 'files');
  const links = (i: number) => ({
    fileUrl: `${urls.compareFile(org, name, c.base, c.head, i, 'file')}?back=${encodeURIComponent(back)}`,
    fragmentUrl: urls.compareFile(org, name, c.base, c.head, i, 'fragment'),
  });
  const place = { org, repo: name, commit: c.head };
  return web.page(
    `Files · ${pull.title} · Pull request #${pull.number} · ${org}/${name}`,
    html`${repoHeader(p, 'pulls')}
${pullHead(org, name, pull, 'files')}
<h2 class="visually-hidden">Files changed</h2>
${diffNotes(c)}
${fileList(c.files)}
${fileBlocks(place, c.files, links)}`,
    { scripts: ['diff'], wide: true },
  );
}

/** One file of the diff between two commits (by its place in it), as a page or a fragment. */
async function oneFile(ctx: PageCtx, d: PullDeps, as: 'page' | 'fragment'): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos);
  const base = ctx.params.base ?? '';
  const head = ctx.params.head ?? '';
  const n = ctx.params.n ?? '';
  if (!COMMIT_ID.test(base) || !COMMIT_ID.test(head) || !/^\d{1,7}$/.test(n)) throw ApiError.notFound('file');
  const c = await d.compare.files(await d.repos.handle(p.target), { base, head });
  const f = c.files[Number(n)];
  if (f === undefined) throw ApiError.notFound('file');
  const place = { org: p.repo.org, repo: p.repo.name, commit: head };
  if (as === 'fragment') return web.fragment(fileBody(place, f));
  const back = safeReturn(ctx.query.back);
  const prefix = urls.repoSub(p.repo.org, p.repo.name, '');
  const links = {
    fileUrl: ctx.path,
    fragmentUrl: urls.compareFile(p.repo.org, p.repo.name, base, head, f.index, 'fragment'),
  };
  return web.page(
    `${f.path} · ${p.repo.org}/${p.repo.name}`,
    html`${repoHeader(p, 'pulls')}
<h1 class="visually-hidden">${f.path} between ${base.slice(0, 12)} and ${head.slice(0, 12)}</h1>
${back.startsWith(prefix) ? html`<p><a href="${back}#file-${f.index}">← All changed files</a></p>` : ''}
${fileBlock(place, f, true, links, 'h2')}`,
    { wide: true },
  );
}
