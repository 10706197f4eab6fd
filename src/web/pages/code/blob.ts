/**
 * A file's page (`/-/blob/:rev/*path`): highlighted lines with anchors, markdown rendered (its
 * source a click away), images shown, binary and too large files described with their download.
 */
import { ApiError } from '../../../http/errors.ts';
import type { BlobContent } from '../../../vcs/reader.ts';
import { web, type PageCtx, type WebReply } from '../../context.ts';
import { highlightLines } from '../../highlight.ts';
import { html, type Html } from '../../html.ts';
import { isMarkdownFile, MARKDOWN_MAX_BYTES, renderMarkdown } from '../../markdown.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { repoHeader } from '../../views/repo.ts';
import { breadcrumbs, codeLines, fileSize, type Place } from '../../views/code/files.ts';
import { refSwitcher } from '../../views/code/refs.ts';
import { refLists, resolveAt, type CodeDeps } from './common.ts';

const RASTER = /\.(png|jpe?g|gif|webp|avif|bmp|ico)$/i;
const SVG = /\.svg$/i;
/** SVG files up to this size are shown as an image (from a data: URL: no script runs in an `<img>`). */
const SVG_MAX_BYTES = 1024 * 1024;

export function blobPages(w: WebRouter, d: CodeDeps): void {
  w.get('/:org/:repo/-/blob/:rev/*path', async (ctx) => blobPage(ctx, d));
}

async function blobPage(ctx: PageCtx, d: CodeDeps): Promise<WebReply> {
  const at = await resolveAt(ctx, d);
  const { p, rev, commit, path } = at;
  const { repo } = p;
  if (path === '') return web.redirect(urls.tree(repo.org, repo.name, rev));
  const [blob, refs] = await Promise.all([
    d.contents.blob(p.target, path, commit).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return undefined;
      throw e;
    }),
    refLists(d, p),
  ]);
  if (blob === undefined) {
    // a directory's path (a README's link to one): its listing; else the 404
    await d.contents.tree(p.target, path, commit);
    return web.redirect(urls.tree(repo.org, repo.name, rev, path));
  }
  const place: Place = { org: repo.org, repo: repo.name, rev, path };
  const raw = urls.raw(repo.org, repo.name, rev, path);
  const plain = ctx.query.plain === '1';
  const { view, lines } = await fileBody(place, blob, raw, plain);
  const markdown = isMarkdownFile(path) && blob.encoding === 'utf-8' && !blob.truncated;
  const toggle = !markdown
    ? ''
    : plain
      ? html`<a href="${urls.blob(repo.org, repo.name, rev, path)}">Rendered</a>`
      : html`<a href="${urls.blob(repo.org, repo.name, rev, path)}?plain=1">Source</a>`;
  const switcher = refSwitcher(repo.org, repo.name, refs, rev, (r) =>
    urls.blob(repo.org, repo.name, r, path),
  );
  const permalink = urls.blob(repo.org, repo.name, commit, path);
  const name = path.split('/').pop() ?? path;
  return web.page(
    `${path} at ${rev} · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'code')}
<h1 class="visually-hidden">${name}</h1>
<div class="code-bar">${switcher}${breadcrumbs(place)}</div>
<div class="file">
<div class="file-head">
<span class="meta">${fileSize(blob.size)}${lines === undefined ? '' : html` · ${lines} ${lines === 1 ? 'line' : 'lines'}`}</span>
<span class="spacer"></span>
${toggle}
<a href="${permalink}">Permalink</a>
<a href="${raw}">Raw</a>
<a href="${raw}?download=1">Download</a>
</div>
${view}
</div>`,
    { scripts: ['refs', 'lines'], wide: true },
  );
}

/** What a file shows, and its line count when it is text shown whole. */
async function fileBody(
  place: Place,
  blob: BlobContent,
  raw: string,
  plain: boolean,
): Promise<{ view: Html; lines?: number }> {
  const { path } = place;
  if (RASTER.test(path)) {
    return { view: html`<div class="file-image"><img src="${raw}" alt="${path}"></div>` };
  }
  if (SVG.test(path) && blob.size <= SVG_MAX_BYTES && !blob.truncated) {
    const b64 = blob.encoding === 'base64' ? blob.content : Buffer.from(blob.content).toString('base64');
    return {
      view: html`<div class="file-image"><img src="data:image/svg+xml;base64,${b64}" alt="${path}"></div>`,
    };
  }
  if (blob.encoding !== 'utf-8') {
    return {
      view: html`<p class="file-note">Binary file, ${blob.size} bytes. <a href="${raw}?download=1">Download it</a>.</p>`,
    };
  }
  if (blob.size === 0) return { view: html`<p class="file-note">This file is empty.</p>`, lines: 0 };
  if (blob.truncated) {
    return {
      view: html`<p class="file-note">This file is too large to show here (${fileSize(blob.size)}). <a href="${raw}">View it raw</a> or <a href="${raw}?download=1">download it</a>.</p>`,
    };
  }
  if (isMarkdownFile(path) && !plain && blob.content.length <= MARKDOWN_MAX_BYTES) {
    const dir = path.split('/').slice(0, -1).join('/');
    const lines = countLines(blob.content);
    return {
      view: html`<div class="markdown file-markdown">${renderMarkdown(blob.content, { ...place, dir })}</div>`,
      lines,
    };
  }
  const { lines, highlighted } = await highlightLines(path, blob.content);
  return { view: codeLines(lines, highlighted), lines: lines.length };
}

function countLines(text: string): number {
  if (text === '') return 0;
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return text.endsWith('\n') ? n : n + 1;
}
