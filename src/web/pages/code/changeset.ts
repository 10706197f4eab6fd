/**
 * A changeset (`/-/changeset/:rev`): its message, author, date, id, branch, the list of changed
 * files and their diffs. Only the first files are shown inline (about 20 files or 2,000 diff
 * lines, whichever comes first; a file of more than 800 changed lines never): the others are
 * collapsed, loaded by the `diff` island from `/-/changeset/:rev/fragment/<n>`, or shown without
 * script on their own page `/-/changeset/:rev/file/<n>` (`n`: the file's place in the changeset).
 */
import { ApiError } from '../../../http/errors.ts';
import { parsedChangeset, type ParsedChangeset } from '../../diff-files.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { html } from '../../html.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { timeAgo } from '../../views/common.ts';
import { repoHeader } from '../../views/repo.ts';
import {
  diffNotes,
  fileBlock,
  fileBlocks,
  fileBody,
  fileList,
  type DiffPlace,
} from '../../views/code/diff.ts';
import { commitOf, type CodeDeps } from './common.ts';
import { refBadges } from './log.ts';

export function changesetPages(w: WebRouter, d: CodeDeps): void {
  // a file by its place in the changeset (never by its path, which the pushed tree chose)
  w.get('/:org/:repo/-/changeset/:rev/file/:n', (ctx) => oneFile(ctx, d, 'page'));
  w.get('/:org/:repo/-/changeset/:rev/fragment/:n', (ctx) => oneFile(ctx, d, 'fragment'));
  w.get('/:org/:repo/-/changeset/:rev', (ctx) => changesetPage(ctx, d));
  // (a branch with `/` typed by hand arrives as several segments: they are the revision)
  w.get('/:org/:repo/-/changeset/*rev', (ctx) => changesetPage(ctx, d));
}

async function load(
  ctx: PageCtx,
  d: CodeDeps,
): Promise<{ p: RepoPage; parsed: ParsedChangeset; place: DiffPlace }> {
  const p = await loadRepo(ctx, d.repos);
  const commit = await commitOf(d, p, ctx.params.rev ?? '');
  if (commit === undefined) throw ApiError.notFound('revision');
  const parsed = await parsedChangeset(p.repo.id, commit, () => d.contents.changeset(p.target, commit));
  return { p, parsed, place: { org: p.repo.org, repo: p.repo.name, commit } };
}

const fileLinks = (place: DiffPlace, index: number) => ({
  fileUrl: urls.repoSub(place.org, place.repo, `changeset/${encodeURIComponent(place.commit)}/file/${index}`),
  fragmentUrl: urls.repoSub(
    place.org,
    place.repo,
    `changeset/${encodeURIComponent(place.commit)}/fragment/${index}`,
  ),
});

async function changesetPage(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const { p, parsed, place } = await load(ctx, d);
  const { cs, files } = parsed;
  const { repo } = p;
  const body = cs.message.slice(cs.subject.length).trim();
  return web.page(
    `${cs.subject} · ${cs.short_id} · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'log')}
<article class="changeset">
<h1 class="subject">${cs.subject === '' ? '(no message)' : cs.subject}</h1>
${body === '' ? '' : html`<pre class="message">${body}</pre>`}
<dl class="commit-meta">
<dt>Author</dt><dd>${cs.author}</dd>
<dt>Date</dt><dd>${timeAgo(cs.date)}</dd>
<dt>Commit</dt><dd><code class="sha">${cs.id}</code></dd>
${cs.branch === '' && cs.tags.length === 0 ? '' : html`<dt>Refs</dt><dd>${refBadges(cs)}</dd>`}
</dl>
<p class="actions"><a class="button subtle" href="${urls.tree(repo.org, repo.name, cs.id)}">Browse files</a><a class="button subtle" href="${urls.log(repo.org, repo.name, cs.id)}">History from here</a></p>
${diffNotes(parsed)}
${fileList(files)}
${fileBlocks(place, files, (i) => fileLinks(place, i))}
</article>`,
    { scripts: ['diff'], wide: true },
  );
}

async function oneFile(ctx: PageCtx, d: CodeDeps, as: 'page' | 'fragment'): Promise<WebReply> {
  const { p, parsed, place } = await load(ctx, d);
  const n = ctx.params.n ?? '';
  const f = /^\d{1,7}$/.test(n) ? parsed.files[Number(n)] : undefined;
  if (f === undefined) throw ApiError.notFound('file');
  const path = f.path;
  if (as === 'fragment') return web.fragment(fileBody(place, f));
  const { cs } = parsed;
  const { repo } = p;
  return web.page(
    `${path} in ${cs.short_id} · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'log')}
<h1 class="visually-hidden">${path} in ${cs.short_id}</h1>
<p><a href="${urls.changeset(repo.org, repo.name, cs.id)}#file-${f.index}">← ${cs.subject === '' ? cs.short_id : cs.subject}</a></p>
${fileBlock(place, f, true, fileLinks(place, f.index), 'h2')}`,
    { wide: true },
  );
}
