/**
 * Files for the browser, authorised by the session like every page (the API ignores cookies):
 * raw files (`/-/raw/:rev/*path`), source archives (`/-/archive/<rev>.tar.gz|zip`) and release
 * assets (`/-/releases/:id/assets/:assetId`, drafts only to members). Each streams its bytes with
 * backpressure; a raw file can never run as a page of this origin (`nosniff`, a sandboxing CSP).
 */
import { pipeline } from 'node:stream/promises';
import { strongEtag, unchanged } from '../../../http/conditional.ts';
import { clientLeft } from '../../../http/connections.ts';
import { ApiError } from '../../../http/errors.ts';
import { sendStream } from '../../../http/stream-reply.ts';
import { attachment } from '../../../storage/index.ts';
import { idParam, web, type PageCtx, type WebReply } from '../../context.ts';
import { loadRepo } from '../../repo-page.ts';
import type { WebRouter } from '../../web.ts';
import { resolveAt, type CodeDeps } from './common.ts';

/** What a file served from a repository may do as a page: nothing. */
export const RAW_CSP = "default-src 'none'; sandbox";

export function downloadPages(w: WebRouter, d: CodeDeps): void {
  w.get('/:org/:repo/-/raw/:rev/*path', (ctx) => raw(ctx, d));
  w.get('/:org/:repo/-/archive/:file', (ctx) => archive(ctx, d));
  w.get('/:org/:repo/-/releases/:id/assets/:assetId', (ctx) => asset(ctx, d));
}

async function raw(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const { p, commit, path } = await resolveAt(ctx, d);
  if (path === '') throw ApiError.notFound('file');
  const { req, res } = ctx;
  const fresh = (version: string) => unchanged(req, res, strongEtag('raw', version));
  const file = await d.contents.raw(p.target, path, commit, { unchanged: fresh });
  res.setHeader('Content-Security-Policy', RAW_CSP);
  if (file === undefined) {
    res.status(304).end();
    return web.handled();
  }
  const name = path.split('/').pop() ?? 'file';
  await sendStream(req, res, {
    headers: {
      'Content-Type': file.contentType,
      'Content-Length': String(file.size),
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': RAW_CSP,
      ...(ctx.query.download === '1' ? { 'Content-Disposition': attachment(name) } : {}),
    },
    body: file.body,
    handOff: undefined,
  });
  return web.handled();
}

const FORMATS = ['tar.gz', 'zip'] as const;

async function archive(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos);
  const file = ctx.params.file ?? '';
  const format = FORMATS.find((f) => file.endsWith(`.${f}`) && file.length > f.length + 1);
  if (format === undefined) throw ApiError.notFound('archive');
  const rev = file.slice(0, -(format.length + 1));
  const { req, res } = ctx;
  const gone = clientLeft(req, res);
  const fresh = (version: string) => unchanged(req, res, strongEtag('archive', version));
  const a = await d.releases.assets.archive(p.target, rev, format, gone, fresh);
  if (a === undefined) {
    res.status(304).end();
    return web.handled();
  }
  await sendStream(req, res, {
    headers: { ...a.headers, 'X-Content-Type-Options': 'nosniff', 'Content-Security-Policy': RAW_CSP },
    body: a.body,
    handOff: undefined,
  });
  return web.handled();
}

async function asset(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos);
  const releaseId = idParam(ctx.params.id);
  const assetId = idParam(ctx.params.assetId);
  // drafts: to organization members who may read releases (the releases service decides, as for the API)
  const viewer = await d.releases.viewer(ctx.access, p.target);
  const range = ctx.req.headers.range;
  const dl = await d.releases.assets.download(p.target, releaseId, assetId, viewer, range);
  const { res } = ctx;
  if (dl.kind === 'redirect') return web.redirect(dl.url);
  res.status(dl.status);
  for (const [k, v] of Object.entries(dl.headers)) res.setHeader(k, v);
  res.setHeader('Content-Security-Policy', RAW_CSP);
  await pipeline(dl.body, res).catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err;
  });
  return web.handled();
}
