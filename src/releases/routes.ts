import { pipeline } from 'node:stream/promises';
import type { Response } from 'express';
import { z } from 'zod';
import { clientLeft } from '../http/connections.ts';
import { reply, respond, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { strongEtag, unchanged } from '../http/conditional.ts';
import { multipartUpload } from '../http/multipart.ts';
import { pathInt, pathText } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import type { Download } from './assets.ts';
import {
  assetSchema,
  assetUploadForm,
  createReleaseBody,
  listReleasesQuery,
  releaseSchema,
  updateReleaseBody,
} from './schemas.ts';
import { RELEASES_READ, RELEASES_WRITE, type ReleasesService } from './service.ts';

const READ = RELEASES_READ;
const WRITE = RELEASES_WRITE;
const READ_403 = 'a private repository and the token lacks releases:read or does not reach it';
const WRITE_403 =
  'the token lacks releases:write or does not reach the repository, or the caller is no org member';
const ID = { id: pathInt };
const ASSET = { id: pathInt, asset_id: pathInt };
const STORE_503 = 'the blob store failed or cannot be reached (`storage_unavailable`)';

export function releaseRoutes(api: Api, releases: ReleasesService): void {
  const { records, assets } = releases;
  // who sees drafts: the rule lives in the service (the web's pages ask it too)
  const viewer = (access: Access, t: RepoTarget) => releases.viewer(access, t);
  const base = '/releases';

  api.repoRoute({
    method: 'get',
    path: base,
    repo: READ,
    tag: 'releases',
    auth: 'public',
    summary:
      'Releases, newest first (drafts only for org members whose token has releases:read and reaches the repository)',
    operationId: 'listReleases',
    query: listReleasesQuery,
    returns: respond.list(releaseSchema, 'releases with their assets'),
    errors: { 403: READ_403 },
    handler: async ({ access, target, query }) =>
      reply.list(await records.list(target, await viewer(access, target), query)),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/tags/:tag`,
    repo: READ,
    params: { tag: pathText },
    tag: 'releases',
    auth: 'public',
    summary: 'The release of a tag',
    operationId: 'getReleaseByTag',
    returns: respond.data(releaseSchema, 'the release'),
    errors: {
      403: READ_403,
      404: 'no such repository or release (or a draft the caller may not see)',
    },
    handler: async ({ access, target, params }) =>
      reply.ok(await records.byTag(target, params.tag, await viewer(access, target))),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/latest`,
    repo: READ,
    tag: 'releases',
    auth: 'public',
    summary: 'The latest release: the one published last that is neither a draft nor a prerelease',
    operationId: 'getLatestRelease',
    returns: respond.data(releaseSchema, 'the release'),
    errors: { 403: READ_403, 404: 'no such repository, or no published release that is not a prerelease' },
    handler: async ({ target }) => reply.ok(await records.latest(target)),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:id`,
    repo: READ,
    params: ID,
    tag: 'releases',
    auth: 'public',
    summary: 'A release',
    operationId: 'getRelease',
    returns: respond.data(releaseSchema, 'the release'),
    errors: {
      403: READ_403,
      404: 'no such repository or release (or a draft the caller may not see)',
    },
    handler: async ({ access, target, params }) =>
      reply.ok(await records.get(target, params.id, await viewer(access, target))),
  });
  api.repoRoute({
    method: 'post',
    path: base,
    repo: WRITE,
    tag: 'releases',
    auth: 'token',
    summary:
      'Create a release (releases:write, org member); with `target_commitish` a missing tag is created there (a `tag` event, CI), for a draft only when it is published',
    operationId: 'createRelease',
    body: createReleaseBody,
    returns: respond.created(releaseSchema, 'the release', (r, p) =>
      apiPath('repos', p.org!, p.repo!, 'releases', r.id),
    ),
    errors: {
      403: WRITE_403,
      409: 'the tag has a release already',
      422: '`tag_name` names no tag and no `target_commitish` was given, `target_commitish` names nothing, or the VCS refuses the tag name',
      503: 'the repository stayed busy (push lock)',
    },
    handler: async ({ access, target, body }) =>
      reply.created(await records.create(target, access.actor(), body)),
  });
  api.repoRoute({
    method: 'patch',
    path: `${base}/:id`,
    repo: WRITE,
    params: ID,
    tag: 'releases',
    auth: 'token',
    summary:
      'Update a release (releases:write, org member); only the fields given change; publishing a draft (`draft: false`) creates its tag',
    operationId: 'updateRelease',
    body: updateReleaseBody,
    returns: respond.data(releaseSchema, 'the updated release'),
    errors: {
      403: WRITE_403,
      409: 'the new tag has a release already',
      422: 'the new `tag_name` (or, when a draft is published, its tag) names no tag and there is no `target_commitish`, it names nothing, or the VCS refuses the tag name',
      503: 'the repository stayed busy (push lock)',
    },
    handler: async ({ access, target, params, body }) =>
      reply.ok(await records.update(target, access.actor(), params.id, body)),
  });
  api.repoRoute({
    method: 'delete',
    path: `${base}/:id`,
    repo: WRITE,
    params: ID,
    tag: 'releases',
    auth: 'token',
    summary: 'Delete a release and all its assets (releases:write, org member); the tag stays',
    operationId: 'deleteRelease',
    returns: respond.empty('deleted'),
    errors: { 403: WRITE_403 },
    handler: async ({ target, params }) => {
      await records.remove(target, params.id);
      return reply.noContent();
    },
  });

  api.repoRoute({
    method: 'get',
    path: `${base}/:id/assets`,
    repo: READ,
    params: ID,
    tag: 'releases',
    auth: 'public',
    summary: 'The assets of a release',
    operationId: 'listReleaseAssets',
    returns: respond.data(z.array(assetSchema), 'the assets, oldest first'),
    errors: { 403: READ_403 },
    handler: async ({ access, target, params }) =>
      reply.ok(await assets.list(target, params.id, await viewer(access, target))),
  });
  api.repoRoute({
    method: 'post',
    path: `${base}/:id/assets`,
    repo: WRITE,
    params: ID,
    form: assetUploadForm,
    tag: 'releases',
    auth: 'token',
    summary:
      'Upload an asset (releases:write, org member): multipart/form-data with the file in `attachment`, optional `name` and `label` fields',
    operationId: 'uploadReleaseAsset',
    returns: respond.created(assetSchema, 'the asset', (a, p) =>
      apiPath('repos', p.org!, p.repo!, 'releases', p.id!, 'assets', a.id),
    ),
    errors: {
      400: 'a broken or stalled multipart body, no file in `attachment`, a second file, a bad name or label, a file part Content-Type over 255 characters or not printable ASCII',
      403: WRITE_403,
      404: 'no such repository or release (also one deleted while the body streamed)',
      409: 'the release has an asset of that name',
      413: 'the file is larger than TRIAD_ASSET_MAX_BYTES',
      415: 'the body is not multipart/form-data',
      503: `${STORE_503}, or the stored file was removed before the upload finished`,
    },
    handler: async ({ access, target, params, req }) => {
      const actor = access.actor();
      const upload = multipartUpload(req, { field: 'attachment', maxBytes: releases.assetMaxBytes });
      return reply.created(await assets.upload(target, actor, params.id, upload));
    },
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:id/assets/:asset_id/download`,
    repo: READ,
    params: ASSET,
    tag: 'releases',
    auth: 'public',
    summary:
      'Download an asset: the bytes (a single `Range` is honoured: 206), or 302 to a presigned URL valid 5 minutes when TRIAD_S3_REDIRECT_DOWNLOADS is on; counts the download',
    operationId: 'downloadReleaseAsset',
    returns: respond.text(
      'application/octet-stream',
      'the bytes (the asset record keeps the uploaded content type)',
      undefined,
      {
        partial: 'one byte range, for a single satisfiable `Range: bytes=...`',
        redirect: 'with TRIAD_S3_REDIRECT_DOWNLOADS=true: to a presigned S3 URL valid 5 minutes',
      },
    ),
    errors: {
      403: READ_403,
      404: 'no such repository, release or asset',
      416: 'a single `Range` whose first byte is past the end of the asset (`Content-Range: bytes */size`)',
      503: STORE_503,
    },
    handler: async ({ access, target, params, req, res }) => {
      const v = await viewer(access, target);
      await send(res, await assets.download(target, params.id, params.asset_id, v, req.headers.range));
      return reply.handled();
    },
  });
  api.repoRoute({
    method: 'delete',
    path: `${base}/:id/assets/:asset_id`,
    repo: WRITE,
    params: ASSET,
    tag: 'releases',
    auth: 'token',
    summary: 'Delete an asset (releases:write, org member)',
    operationId: 'deleteReleaseAsset',
    returns: respond.empty('deleted'),
    errors: { 403: WRITE_403, 404: 'no such repository, release or asset' },
    handler: async ({ target, params }) => {
      await assets.remove(target, params.id, params.asset_id);
      return reply.noContent();
    },
  });

  for (const format of ['tar.gz', 'zip'] as const) {
    api.repoRoute({
      method: 'get',
      path: `/archive/:rev.${format}`,
      repo: { scope: 'repo:read' },
      params: { rev: pathText },
      tag: 'releases',
      auth: 'public',
      summary: `Source archive (${format}) of a commit, branch, bookmark or tag, streamed from the VCS`,
      operationId: format === 'zip' ? 'getZipArchive' : 'getTarArchive',
      returns: respond.text(
        format === 'zip' ? 'application/zip' : 'application/gzip',
        'the archive',
        undefined,
        {
          etag: 'the commit `rev` resolves to, the format and the folder name inside the archive',
        },
      ),
      errors: {
        403: 'a private repository and the token lacks repo:read',
        404: 'no such repository or revision',
        503: 'too many archives, clones and pushes at once (`service_unavailable`, with `Retry-After`)',
      },
      handler: async ({ target, params, req, res }) => {
        const gone = clientLeft(req, res);
        const fresh = (version: string) => unchanged(req, res, strongEtag('archive', version));
        const a = await assets.archive(target, params.rev, format, gone, fresh);
        return a === undefined ? reply.notModified() : reply.stream(a.headers, a.body);
      },
    });
  }
}

/** Writes a download: a redirect, or the bytes with backpressure (a client gone stops the read). */
async function send(res: Response, d: Download): Promise<void> {
  if (d.kind === 'redirect') {
    res.redirect(302, d.url);
    return;
  }
  res.status(d.status);
  for (const [k, v] of Object.entries(d.headers)) res.setHeader(k, v);
  await pipeline(d.body, res).catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err;
  });
}
