/**
 * The repository home (`/:org/:repo`, also the clone URL: only browser navigations get the page)
 * and directory pages (`/-/tree/:rev/*path`).
 */
import { ApiError } from '../../../http/errors.ts';
import { RESERVED_ORG_NAMES } from '../../../orgs/service.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { html } from '../../html.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { repoHeader } from '../../views/repo.ts';
import { breadcrumbs, readmeBox, treeTable } from '../../views/code/files.ts';
import { archiveLinks, cloneBox, emptyRepo, lastCommit } from '../../views/code/home.ts';
import { refSwitcher } from '../../views/code/refs.ts';
import { commitOf, readmeOf, refLists, resolveAt, type At, type CodeDeps } from './common.ts';

const SCRIPTS = ['copy', 'refs'];

export function repoHomePages(w: WebRouter, d: CodeDeps): void {
  w.navigation('/:org/:repo', async (ctx) => {
    // (`/-/x` and the like are no repository: a global page that does not exist)
    if (RESERVED_ORG_NAMES.has((ctx.params.org ?? '').toLowerCase())) throw ApiError.notFound('page');
    const p = await loadRepo(ctx, d.repos);
    const rev = p.repo.default_branch;
    const commit = await commitOf(d, p, rev);
    if (commit === undefined) return noDefaultBranch(d, p);
    return treePage(d, { p, rev, commit, path: '' }, true);
  });
  const tree = async (ctx: PageCtx) => treePage(d, await resolveAt(ctx, d), false);
  w.get('/:org/:repo/-/tree/:rev', tree);
  w.get('/:org/:repo/-/tree/:rev/*path', tree);
}

/** The home of a repository without its default branch: empty, or only other lines were pushed. */
async function noDefaultBranch(d: CodeDeps, p: RepoPage): Promise<WebReply> {
  const { repo } = p;
  const refs = await refLists(d, p);
  const title = `${repo.org}/${repo.name}`;
  const head = html`${repoHeader(p, 'code')}
${repo.description === '' ? '' : html`<p class="description">${repo.description}</p>`}`;
  if (refs.branch.total === 0 && refs.tag.total === 0 && (refs.bookmark?.total ?? 0) === 0)
    return emptyPage(p);
  return web.page(
    title,
    html`${head}
<div class="code-bar">${refSwitcher(repo.org, repo.name, refs, repo.default_branch, (r) => urls.tree(repo.org, repo.name, r))}</div>
<p class="flash warn">The default branch <strong>${repo.default_branch}</strong> has no commits yet: pick another line above.</p>
${cloneBox(repo)}`,
    { scripts: SCRIPTS, wide: true },
  );
}

/** An empty repository's home: how to push to it. */
function emptyPage(p: RepoPage): WebReply {
  const { repo } = p;
  return web.page(
    `${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'code')}
${repo.description === '' ? '' : html`<p class="description">${repo.description}</p>`}
${emptyRepo(repo)}
${cloneBox(repo)}`,
    { scripts: SCRIPTS, wide: true },
  );
}

/** A directory at a revision; the home is its root at the default branch, with the clone box and last commit. */
async function treePage(d: CodeDeps, at: At, home: boolean): Promise<WebReply> {
  const { p, rev, commit, path } = at;
  const { repo } = p;
  const [entries, refs, log] = await Promise.all([
    d.contents.tree(p.target, path, commit).catch((e: unknown) => {
      // a file's path: its page
      if (e instanceof ApiError && e.status === 404 && /directory/.test(e.message)) return undefined;
      throw e;
    }),
    refLists(d, p),
    home ? d.contents.log(p.target, { rev: commit, page: 1, per_page: 1 }) : Promise.resolve(undefined),
  ]);
  if (entries === undefined) return web.redirect(urls.blob(repo.org, repo.name, rev, path));
  // (a new Fossil repository has one check-in without files: it is empty all the same)
  if (home && entries.length === 0 && (log?.total ?? 0) <= 1) return emptyPage(p);
  const readme = await readmeOf(d, at, entries);
  const place = { org: repo.org, repo: repo.name, rev, path };
  const switcher = refSwitcher(repo.org, repo.name, refs, rev, (r) =>
    urls.tree(repo.org, repo.name, r, path),
  );
  const newest = log?.items[0];
  const history = html`<a href="${urls.log(repo.org, repo.name, rev)}">History${log === undefined ? '' : html` (${log.total} ${log.total === 1 ? 'commit' : 'commits'})`}</a>`;
  const listing = html`<div class="code-bar">${switcher}${home ? '' : breadcrumbs(place)}<span class="spacer"></span>${history}${archiveLinks(repo.org, repo.name, rev)}</div>
${newest === undefined ? '' : lastCommit(repo.org, repo.name, newest)}
<h2 class="visually-hidden">Files</h2>
${treeTable(place, entries)}
${readmeBox(place, readme)}`;
  const body = home
    ? html`${repoHeader(p, 'code')}
${repo.description === '' ? '' : html`<p class="description">${repo.description}</p>`}
<div class="columns">
<div class="grow">${listing}</div>
<aside class="side">${cloneBox(repo)}</aside>
</div>`
    : html`${repoHeader(p, 'code')}${listing}`;
  const title = home
    ? `${repo.org}/${repo.name}`
    : `${path === '' ? repo.name : path} at ${rev} · ${repo.org}/${repo.name}`;
  return web.page(title, body, { scripts: home ? SCRIPTS : ['refs'], wide: true });
}
