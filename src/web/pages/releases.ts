/**
 * Releases of a repository (`/:org/:repo/-/releases…`): the list (newest first, paged as the API,
 * drafts only for members), a release's page (facts, notes, source archives, assets, the upload
 * form), the forms of a new release and of a change, and the deletion with its confirmation page.
 * Everything goes through the releases service with the session's `Access`, as the API does;
 * the asset routes are in release-assets.ts.
 */
import { EDITOR_SCRIPT, editorText } from '../views/markdown-editor.ts';
import { parseWith, rejectNul } from '../../http/input.ts';
import { ApiError } from '../../http/errors.ts';
import { createReleaseBody, updateReleaseBody, type ReleaseJson } from '../../releases/schemas.ts';
import { RELEASES_READ, RELEASES_WRITE } from '../../releases/service.ts';
import {
  field,
  idParam,
  web,
  type FormState,
  type PageCtx,
  type UserCtx,
  type WebReply,
} from '../context.ts';
import { html, type Html } from '../html.ts';
import { loadRepo, type RepoPage } from '../repo-page.ts';
import { urls } from '../urls.ts';
import type { WebRouter } from '../web.ts';
import { pageParam, pager } from '../views/common.ts';
import { archiveLinks } from '../views/code/home.ts';
import { confirmDeletion } from '../views/confirm.ts';
import { formError } from '../views/forms.ts';
import { repoHeader } from '../views/repo.ts';
import { assetsList, uploadForm } from '../views/release-assets.ts';
import {
  releaseBadges,
  releaseFacts,
  releaseForm,
  releaseList,
  releaseNotes,
  releaseTitle,
} from '../views/releases.ts';
import { refLists, type CodeDeps } from './code/common.ts';

/** The list's page size: the API's default, `per_page` up to its maximum. */
const PER_PAGE = 30;
const MAX_PER_PAGE = 100;

const FLASHES: Record<string, string> = {
  created: 'The release was created.',
  saved: 'The release was saved.',
  uploaded: 'The file was uploaded.',
  asset_deleted: 'The file was deleted.',
  deleted: 'The release was deleted.',
};

/** The flash a redirect asked for (`?saved=1`…), unless a refused form has its own message. */
function flash(ctx: PageCtx, state: FormState = { values: {} }) {
  const key = state.error === undefined ? Object.keys(FLASHES).find((k) => ctx.query[k] === '1') : undefined;
  return key === undefined ? '' : html`<p class="flash ok" role="status">${FLASHES[key]}</p>`;
}

/** `per_page` as the API takes it: 1 to 100 (more is 100), 30 when absent or not a number. */
function perPage(v: string | undefined): number {
  return v !== undefined && /^\d{1,6}$/.test(v) && Number(v) >= 1
    ? Math.min(Number(v), MAX_PER_PAGE)
    : PER_PAGE;
}

/** The list's address for its pager: `per_page` kept, a flash (`?deleted=1`) not. */
function listUrl(org: string, repo: string, perPageParam: string | undefined): string {
  const base = urls.releases(org, repo);
  return perPageParam === undefined ? base : `${base}?per_page=${encodeURIComponent(perPageParam)}`;
}

/** The newest published release that is neither a draft nor a pre-release, as the API's `latest`. */
async function latestId(d: CodeDeps, p: RepoPage): Promise<number | undefined> {
  try {
    return (await d.releases.records.latest(p.target)).id;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}

/** The repository and the release of the path, as the viewer may see it (a hidden draft is a 404). */
export async function loadRelease(
  ctx: PageCtx,
  d: CodeDeps,
  needs = RELEASES_READ,
): Promise<{ p: RepoPage; r: ReleaseJson; canWrite: boolean }> {
  const p = await loadRepo(ctx, d.repos, needs);
  const id = idParam(ctx.params.id);
  const viewer = await d.releases.viewer(ctx.access, p.target);
  const [r, canWrite] = await Promise.all([
    d.releases.records.get(p.target, id, viewer),
    d.releases.mayWrite(ctx.access, p.target),
  ]);
  return { p, r, canWrite };
}

/** A page below the Releases tab (`scripts`: its islands). */
export function releasesPage(p: RepoPage, title: string, body: Html, scripts: string[] = []): WebReply {
  return web.page(
    `${title} · Releases · ${p.repo.org}/${p.repo.name}`,
    html`${repoHeader(p, 'releases')}${body}`,
    { scripts },
  );
}

async function listPage(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, RELEASES_READ);
  const { org, name } = p.repo;
  const q = { page: pageParam(ctx.query.page), per_page: perPage(ctx.query.per_page) };
  const viewer = await d.releases.viewer(ctx.access, p.target);
  const [list, latest, canWrite] = await Promise.all([
    d.releases.records.list(p.target, viewer, q),
    latestId(d, p),
    d.releases.mayWrite(ctx.access, p.target),
  ]);
  const create = canWrite
    ? html`<a class="button primary" href="${urls.newRelease(org, name)}">New release</a>`
    : '';
  return releasesPage(
    p,
    'Releases',
    html`<div class="heading-row"><h1>Releases</h1>${create}</div>
${flash(ctx)}
${releaseList(org, name, list.items, latest)}
${pager(listUrl(org, name, ctx.query.per_page), list.page, q.per_page, list.total)}`,
  );
}

/** A release's page; `state`: a refused upload (its reason above the upload form). */
export async function releasePage(ctx: PageCtx, d: CodeDeps, state: FormState): Promise<WebReply> {
  const { p, r, canWrite } = await loadRelease(ctx, d);
  const { org, name } = p.repo;
  const latest = r.draft || r.prerelease ? undefined : await latestId(d, p);
  const actions = canWrite
    ? html`<div class="actions"><a class="button" href="${urls.release(org, name, r.id, 'edit')}">Edit</a> <a class="button danger" href="${urls.release(org, name, r.id, 'delete')}">Delete</a></div>`
    : '';
  const source = r.draft
    ? html`<p class="muted">The source archives come with the tag, once the release is published.</p>`
    : html`<p>Source code at ${r.tag_name}: ${archiveLinks(org, name, r.tag_name)}</p>`;
  const upload =
    canWrite && ctx.formToken !== undefined
      ? uploadForm(org, name, r, ctx.formToken, state, d.releases.assetMaxBytes)
      : '';
  return releasesPage(
    p,
    releaseTitle(r),
    html`<p class="crumbs"><a href="${urls.releases(org, name)}">Releases</a> /</p>
<div class="heading-row"><h1 class="break">${releaseTitle(r)}${releaseBadges(r, latest)}</h1>${actions}</div>
${flash(ctx, state)}
${releaseFacts(org, name, r)}
<section aria-labelledby="notes-h"><h2 id="notes-h" class="visually-hidden">Release notes</h2>${releaseNotes(org, name, r)}</section>
<section aria-labelledby="assets-h" id="assets">
<h2 id="assets-h">Assets</h2>
${assetsList(org, name, r, canWrite)}
${source}
</section>
${upload}`,
    canWrite ? ['upload'] : [],
  );
}

/** The form's fields as the API's body, before its schema judges them; notes keep `\n` line ends. */
function releaseFields(values: FormState['values']) {
  rejectNul(values, 'form');
  const target = field(values, 'target_commitish');
  return {
    tag_name: field(values, 'tag_name'),
    ...(target === '' ? {} : { target_commitish: target }),
    name: field(values, 'name'),
    body: editorText(values, 'body'),
    draft: field(values, 'draft') === 'on',
    prerelease: field(values, 'prerelease') === 'on',
  };
}

export function releasePages(w: WebRouter, d: CodeDeps): void {
  const base = '/:org/:repo/-/releases';
  w.get(base, (ctx) => listPage(ctx, d));

  const newPage = async (ctx: PageCtx, state: FormState) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
    const { org, name } = p.repo;
    return releasesPage(
      p,
      'New release',
      html`<p class="crumbs"><a href="${urls.releases(org, name)}">Releases</a> /</p>
<h1>New release</h1>
${formError(state)}
${releaseForm({ action: urls.newRelease(org, name), formToken: ctx.formToken ?? '', state, refs: await refLists(d, p), repo: p.repo })}`,
      [EDITOR_SCRIPT],
    );
  };
  w.form(`${base}/new`, newPage, async (ctx: UserCtx, values) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
    const r = await d.releases.records.create(
      p.target,
      ctx.access.actor(),
      parseWith(createReleaseBody, releaseFields(values), 'form'),
    );
    return web.redirect(`${urls.release(p.repo.org, p.repo.name, r.id)}?created=1`);
  });

  // (before `:id`: `latest` is no id)
  w.get(`${base}/latest`, async (ctx) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_READ);
    const r = await d.releases.records.latest(p.target);
    return web.redirect(urls.release(p.repo.org, p.repo.name, r.id));
  });
  w.get(`${base}/:id`, (ctx) => releasePage(ctx, d, { values: {} }));

  const editPage = async (ctx: PageCtx, state: FormState) => {
    const { p, r } = await loadRelease(ctx, d, RELEASES_WRITE);
    const { org, name } = p.repo;
    return releasesPage(
      p,
      `Edit ${releaseTitle(r)}`,
      html`<p class="crumbs"><a href="${urls.releases(org, name)}">Releases</a> / <a href="${urls.release(org, name, r.id)}" class="break">${releaseTitle(r)}</a> /</p>
<h1>Edit release</h1>
${formError(state)}
${releaseForm({ action: urls.release(org, name, r.id, 'edit'), formToken: ctx.formToken ?? '', state, refs: await refLists(d, p), repo: p.repo, release: r })}`,
      [EDITOR_SCRIPT],
    );
  };
  w.form(`${base}/:id/edit`, editPage, async (ctx, values) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
    const id = idParam(ctx.params.id);
    await d.releases.records.update(
      p.target,
      ctx.access.actor(),
      id,
      parseWith(updateReleaseBody, releaseFields(values), 'form'),
    );
    return web.redirect(`${urls.release(p.repo.org, p.repo.name, id)}?saved=1`);
  });

  w.userGet(`${base}/:id/delete`, async (ctx) => {
    const { p, r } = await loadRelease(ctx, d, RELEASES_WRITE);
    const { org, name } = p.repo;
    const n = r.assets.length;
    const gone = n === 0 ? 'The release is' : `The release and its ${n} file${n === 1 ? '' : 's'} are`;
    return releasesPage(
      p,
      `Delete ${releaseTitle(r)}`,
      confirmDeletion({
        question: `Delete the release ${releaseTitle(r)}?`,
        detail: `${gone} deleted for good. The tag ${r.tag_name} stays in the repository.`,
        action: urls.release(org, name, r.id, 'delete'),
        formToken: ctx.formToken,
        button: 'Delete release',
        cancel: urls.release(org, name, r.id),
      }),
    );
  });
  w.userPost(`${base}/:id/delete`, async (ctx) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
    await d.releases.records.remove(p.target, idParam(ctx.params.id));
    return web.redirect(`${urls.releases(p.repo.org, p.repo.name)}?deleted=1`);
  });
}
