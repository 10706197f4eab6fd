/**
 * A release's files: the upload (a multipart form streamed to the blob store through the same
 * service call as the API's upload; the `upload` island sends it with `?fragment=1` and gets the
 * new assets table, or the reason of a refusal, as a fragment) and the deletion of a file with its
 * confirmation page. Downloads are the session route of code/downloads.ts.
 */
import { ApiError } from '../../http/errors.ts';
import type { IncomingUpload } from '../../http/multipart.ts';
import { RELEASES_READ, RELEASES_WRITE } from '../../releases/service.ts';
import { idParam, web, type FormState, type PageCtx, type UserCtx, type WebReply } from '../context.ts';
import { html } from '../html.ts';
import { loadRepo } from '../repo-page.ts';
import { urls } from '../urls.ts';
import type { WebRouter } from '../web.ts';
import { confirmDeletion } from '../views/confirm.ts';
import { assetsList } from '../views/release-assets.ts';
import { releaseTitle } from '../views/releases.ts';
import type { CodeDeps } from './code/common.ts';
import { loadRelease, releasePage, releasesPage } from './releases.ts';

/** The island's requests: answered with fragments, never with a page or a redirect. */
function wantsFragment(ctx: PageCtx): boolean {
  return ctx.query.fragment === '1';
}

/**
 * The form always sends its Name field: left empty, the asset takes the file's name (the API's
 * rule for a request without a `name` field).
 */
function unnamedIsFileName(upload: IncomingUpload): IncomingUpload {
  return {
    ...upload,
    end: async () => {
      const fields = await upload.end();
      if (fields.name?.trim() === '') delete fields.name;
      return fields;
    },
  };
}

export function releaseAssetPages(w: WebRouter, d: CodeDeps): void {
  const base = '/:org/:repo/-/releases/:id/assets';

  // the upload form's address, opened again (a reload after a refused upload): the release's page
  w.get(base, async (ctx) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_READ);
    return web.redirect(`${urls.release(p.repo.org, p.repo.name, idParam(ctx.params.id))}#assets`);
  });

  const refused = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    if (wantsFragment(ctx)) return web.fragment(html`<p>${state.error}</p>`);
    // (a forbidden upload is the 403 page, not the release's page with a message)
    await loadRepo(ctx, d.repos, RELEASES_WRITE);
    return releasePage(ctx, d, state);
  };
  w.userUpload(
    base,
    { field: 'attachment', maxBytes: d.releases.assetMaxBytes },
    async (ctx, upload) => {
      const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
      const { org, name } = p.repo;
      const id = idParam(ctx.params.id);
      await d.releases.assets.upload(p.target, ctx.access.actor(), id, unnamedIsFileName(upload));
      if (!wantsFragment(ctx)) return web.redirect(`${urls.release(org, name, id)}?uploaded=1#assets`);
      const viewer = await d.releases.viewer(ctx.access, p.target);
      const r = await d.releases.records.get(p.target, id, viewer);
      return web.fragment(assetsList(org, name, r, true), 201);
    },
    { render: refused },
  );

  w.userGet(`${base}/:assetId/delete`, async (ctx) => {
    const { p, r } = await loadRelease(ctx, d, RELEASES_WRITE);
    const { org, name } = p.repo;
    const assetId = idParam(ctx.params.assetId);
    const a = r.assets.find((x) => x.id === assetId);
    if (a === undefined) throw ApiError.notFound('asset');
    return releasesPage(
      p,
      `Delete ${a.name}`,
      confirmDeletion({
        question: `Delete the file ${a.name}?`,
        detail: `It is removed from the release ${releaseTitle(r)} for good, and its download links stop working.`,
        action: urls.releaseAssetDelete(org, name, r.id, a.id),
        formToken: ctx.formToken,
        button: 'Delete file',
        cancel: urls.release(org, name, r.id),
      }),
    );
  });
  w.userPost(`${base}/:assetId/delete`, async (ctx) => {
    const p = await loadRepo(ctx, d.repos, RELEASES_WRITE);
    const id = idParam(ctx.params.id);
    await d.releases.assets.remove(p.target, id, idParam(ctx.params.assetId));
    return web.redirect(`${urls.release(p.repo.org, p.repo.name, id)}?asset_deleted=1`);
  });
}
