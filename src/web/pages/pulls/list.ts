/**
 * The pull requests of a repository (`/-/pulls`, by status, 25 a page) and a new one
 * (`/-/pulls/new`): a GET form picks the target and the source among the repository's branches
 * (Mercurial: bookmarks, `@` and named branches), the compare of the two (commits and files)
 * shows below, and members open the pull request with a title and a description. Works
 * without script; the `diff` island loads collapsed files.
 */
import { ApiError } from '../../../http/errors.ts';
import { parseWith } from '../../../http/input.ts';
import { createPullBody, PULL_STATUSES, type PullStatus } from '../../../pulls/schemas.ts';
import type { CompareResult } from '../../../repos/compare.ts';
import { field, web, type FormState, type PageCtx, type WebReply } from '../../context.ts';
import { html, type Html } from '../../html.ts';
import { loginUrl } from '../../layout.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { pageParam, pager } from '../../views/common.ts';
import { csrf, formError, input } from '../../views/forms.ts';
import { EDITOR_SCRIPT, editorText, markdownEditor } from '../../views/markdown-editor.ts';
import { commitLine, pullList } from '../../views/pulls.ts';
import { repoHeader } from '../../views/repo.ts';
import { diffNotes, fileBlocks, fileList } from '../../views/code/diff.ts';
import { PULLS_MEMBER, PULLS_READ, type PullDeps } from './common.ts';

const PER_PAGE = 25;
/** Refs of each kind offered in the source and target menus. */
const MENU_REFS = 100;

export function pullListPages(w: WebRouter, d: PullDeps): void {
  w.get('/:org/:repo/-/pulls', (ctx) => listPage(ctx, d));
  w.get('/:org/:repo/-/pulls/new', (ctx) => newPage(ctx, d, { values: {} }));
  w.userPost(
    '/:org/:repo/-/pulls/new',
    async (ctx, values) => {
      const p = await loadRepo(ctx, d.repos, PULLS_READ);
      await ctx.access.authorize(p.target, PULLS_MEMBER);
      const body = parseWith(
        createPullBody,
        {
          title: field(values, 'title'),
          body: editorText(values, 'body'),
          source_ref: field(values, 'source'),
          target_ref: field(values, 'target'),
        },
        'form',
      );
      const pull = await d.pulls.writes.create(p.target, ctx.access.actor(), body);
      return web.redirect(urls.pull(p.repo.org, p.repo.name, pull.number));
    },
    { render: (ctx, state) => newPage(ctx, d, state) },
  );
}

async function listPage(ctx: PageCtx, d: PullDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, PULLS_READ);
  const { repo } = p;
  const status = (ctx.query.status ?? 'open') as PullStatus;
  if (!PULL_STATUSES.includes(status)) throw ApiError.validation('status: must be open, closed or merged');
  const page = pageParam(ctx.query.page);
  const list = await d.pulls.reads.list(p.target, { status, page, per_page: PER_PAGE });
  const filters = PULL_STATUSES.map(
    (s) =>
      html`<li><a href="${urls.pulls(repo.org, repo.name, s)}"${s === status ? html` aria-current="page"` : ''}>${s[0]!.toUpperCase()}${s.slice(1)}</a></li>`,
  );
  const create =
    p.role === undefined
      ? ''
      : html`<a class="button primary" href="${urls.newPull(repo.org, repo.name)}">New pull request</a>`;
  return web.page(
    `Pull requests · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'pulls')}
<div class="heading-row"><h1>Pull requests</h1>${create}</div>
<nav class="tabs sub" aria-label="Status"><ul>${filters}</ul></nav>
<p class="muted">${list.total} ${status} ${list.total === 1 ? 'pull request' : 'pull requests'}</p>
${pullList(repo.org, repo.name, list.items, `No ${status} pull requests.`)}
${pager(ctx.path, page, PER_PAGE, list.total)}`,
  );
}

/** The refs a pull request may name, grouped as the menus show them. */
async function refChoices(d: PullDeps, p: RepoPage): Promise<{ label: string; names: string[] }[]> {
  const q = { page: 1, per_page: MENU_REFS };
  const names = (list: { items: { name: string }[] }) => list.items.map((r) => r.name);
  if (p.repo.vcs !== 'hg')
    return [{ label: 'Branches', names: names(await d.refs.list(p.target, 'branch', q)) }];
  const [marks, branches] = await Promise.all([
    d.refs.list(p.target, 'bookmark', q),
    d.refs.list(p.target, 'branch', q),
  ]);
  // `@` stands for the default branch's head while no bookmark has that name
  const bookmarks = ['@', ...names(marks).filter((n) => n !== '@')];
  return [
    { label: 'Bookmarks', names: bookmarks },
    { label: 'Named branches', names: names(branches).filter((n) => !bookmarks.includes(n)) },
  ];
}

function refSelect(
  name: string,
  label: string,
  groups: { label: string; names: string[] }[],
  value: string,
): Html {
  const known = groups.some((g) => g.names.includes(value));
  const option = (n: string) => html`<option value="${n}"${n === value ? html` selected` : ''}>${n}</option>`;
  return html`<div class="field">
<label for="f-${name}">${label}</label>
<select id="f-${name}" name="${name}">
${value === '' ? html`<option value="" selected>Choose…</option>` : known ? '' : option(value)}
${groups.map((g) => (g.names.length === 0 ? '' : html`<optgroup label="${g.label}">${g.names.map(option)}</optgroup>`))}
</select>
</div>`;
}

async function newPage(ctx: PageCtx, d: PullDeps, state: FormState): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, PULLS_READ);
  const { repo } = p;
  const kept = (k: string) => field(state.values, k) || (ctx.query[k] ?? '');
  const target = kept('target') || (repo.vcs === 'hg' ? '@' : repo.default_branch);
  const source = kept('source');
  const groups = await refChoices(d, p);
  const picker = html`<form method="get" action="${urls.newPull(repo.org, repo.name)}" class="card compare-form">
${refSelect('target', 'Into (target)', groups, target)}
<span class="compare-arrow" aria-hidden="true">←</span>
${refSelect('source', 'From (source)', groups, source)}
<p><button type="submit" class="button">Compare</button></p>
</form>`;
  let below: Html = html`<p class="empty">Choose the source whose changes should go into the target.</p>`;
  let status = 200;
  if (source !== '' && source === target) {
    below = html`<p class="flash warn" role="status">The source and the target are the same: choose two different ones.</p>`;
  } else if (source !== '') {
    try {
      const c = await d.compare.compare(p.target, target, source);
      below = compareView(ctx, p, state, { source, target }, c);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 404) throw e;
      status = 404;
      // (the compare's base is the target, its head the source)
      const what = e.message
        .replace(/^base /, 'target ')
        .replace(/^head /, 'source ')
        .replace(/ not found$/, '');
      below = html`<p class="flash error" role="alert">Nothing to compare: the ${what} does not exist.</p>`;
    }
  }
  return web.page(
    `New pull request · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'pulls')}
<h1>New pull request</h1>
${formError(state)}
${picker}
${below}`,
    { scripts: ['diff', EDITOR_SCRIPT], wide: true, status },
  );
}

function compareView(
  ctx: PageCtx,
  p: RepoPage,
  state: FormState,
  refs: { source: string; target: string },
  c: CompareResult,
): Html {
  const { repo } = p;
  const here = urls.newPull(repo.org, repo.name, refs);
  const place = { org: repo.org, repo: repo.name, commit: c.head };
  const links = (i: number) => ({
    fileUrl: `${urls.compareFile(repo.org, repo.name, c.base, c.head, i, 'file')}?back=${encodeURIComponent(here)}`,
    fragmentUrl: urls.compareFile(repo.org, repo.name, c.base, c.head, i, 'fragment'),
  });
  const title =
    field(state.values, 'title') || (c.totalCommits === 1 ? (c.commits[0]?.subject ?? '') : refs.source);
  const form =
    ctx.formToken === undefined
      ? html`<p><a href="${loginUrl(here)}">Sign in</a> to open a pull request.</p>`
      : p.role === undefined
        ? html`<p class="meta">Only members of ${repo.org} can open pull requests here.</p>`
        : html`<form method="post" action="${urls.newPull(repo.org, repo.name)}" class="card">
${csrf(ctx.formToken)}
<input type="hidden" name="source" value="${refs.source}">
<input type="hidden" name="target" value="${refs.target}">
${input({ name: 'title', label: 'Title', required: true, maxlength: 1000, value: title })}
${markdownEditor({ repo: p.repo, name: 'body', label: 'Description', rows: 8, value: field(state.values, 'body') })}
<p><button type="submit" class="button primary">Open pull request</button></p>
</form>`;
  const more =
    c.totalCommits > c.commits.length
      ? html`<p class="meta">The first ${c.commits.length} of ${c.totalCommits} commits.</p>`
      : '';
  return html`<p class="meta">${c.totalCommits} ${c.totalCommits === 1 ? 'commit' : 'commits'} and ${c.files.length} changed ${c.files.length === 1 ? 'file' : 'files'} from ${refs.source} that ${refs.target} does not have.</p>
${c.totalCommits === 0 ? html`<p class="flash warn" role="status">${refs.target} already contains ${refs.source}: there is nothing to merge.</p>` : form}
<section aria-labelledby="commits-h">
<h2 id="commits-h">Commits</h2>
${c.commits.length === 0 ? html`<p class="empty">No commits.</p>` : html`<ol class="commits">${c.commits.map((x) => commitLine(repo.org, repo.name, x))}</ol>`}
${more}
</section>
<section aria-labelledby="files-h">
<h2 id="files-h">Files changed</h2>
${diffNotes(c)}
${fileList(c.files)}
${fileBlocks(place, c.files, links)}
</section>`;
}
