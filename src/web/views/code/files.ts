/** Views of files and directories: breadcrumbs, directory listings, file lines, READMEs, sizes. */
import type { TreeEntry } from '../../../vcs/reader.ts';
import { html, trusted, type Html } from '../../html.ts';
import { renderMarkdown } from '../../markdown.ts';
import { urls } from '../../urls.ts';

/** Where a page is: repository, revision as named in the URL, path ('' = root). */
export type Place = { org: string; repo: string; rev: string; path: string };

/** `1.2 KiB`-style sizes (bytes below 1 KiB). */
export function fileSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} ${bytes === 1 ? 'byte' : 'bytes'}`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** The repository name, then each directory of `path` as a link; the last segment as text. */
export function breadcrumbs(p: Place, asLink = false): Html {
  const segs = p.path === '' ? [] : p.path.split('/');
  const items: Html[] = [html`<li><a href="${urls.tree(p.org, p.repo, p.rev)}">${p.repo}</a></li>`];
  segs.forEach((seg, i) => {
    const sub = segs.slice(0, i + 1).join('/');
    const last = i === segs.length - 1;
    items.push(
      last && !asLink
        ? html`<li><span aria-current="page">${seg}</span></li>`
        : html`<li><a href="${urls.tree(p.org, p.repo, p.rev, sub)}">${seg}</a></li>`,
    );
  });
  return html`<nav class="crumbs" aria-label="Path"><ol>${items}</ol></nav>`;
}

/** A directory's entries (dirs first, as the readers sort them), each a link to its page. */
export function treeTable(p: Place, entries: readonly TreeEntry[]): Html {
  if (entries.length === 0) return html`<p class="empty">This directory is empty.</p>`;
  const at = (name: string) => (p.path === '' ? name : `${p.path}/${name}`);
  const parent =
    p.path === ''
      ? ''
      : html`<tr><td class="name"><a href="${urls.tree(p.org, p.repo, p.rev, p.path.split('/').slice(0, -1).join('/'))}" aria-label="Parent directory">..</a></td><td class="size"></td></tr>`;
  const rows = entries.map((e) =>
    e.is_dir
      ? html`<tr><td class="name"><a href="${urls.tree(p.org, p.repo, p.rev, at(e.name))}">${e.name}/</a></td><td class="size"><span class="visually-hidden">directory</span></td></tr>`
      : html`<tr><td class="name"><a href="${urls.blob(p.org, p.repo, p.rev, at(e.name))}">${e.name}</a></td><td class="size">${fileSize(e.size)}</td></tr>`,
  );
  return html`<table class="list tree">
<thead><tr><th scope="col">Name</th><th scope="col" class="size">Size</th></tr></thead>
<tbody>${parent}${rows}</tbody>
</table>`;
}

/**
 * A file's lines: each row has the id `L<n>` and its number is a link to `#L<n>` (the `lines`
 * island adds ranges). `lines` are HTML already (escaped or highlighted).
 */
export function codeLines(lines: readonly string[], highlighted: boolean): Html {
  const parts: Html[] = [];
  // long files in chunks the browser lays out only when they come into view
  const chunked = lines.length > CHUNK_LINES * 2;
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    if (chunked && i % CHUNK_LINES === 0)
      parts.push(i === 0 ? html`<div class="chunk">` : html`</div><div class="chunk">`);
    // (each line is highlight.js's markup or escaped text: highlight.ts)
    parts.push(html`<div class="l" id="L${n}"><a class="ln" href="#L${n}">${n}</a><code class="lc">${trusted(lines[i] ?? '')}</code></div>
`);
  }
  if (chunked) parts.push(html`</div>`);
  const cls = `code-view${highlighted ? ' hljs' : ''}${chunked ? ' chunked' : ''}`;
  return html`<div class="${cls}" data-lines>${parts}</div>`;
}

/** Lines of a chunk of a long file (the stylesheet's `contain-intrinsic-size` of `.chunk` assumes it). */
const CHUNK_LINES = 500;

/** A README below a listing: rendered markdown, or its text. */
export function readmeBox(
  p: Place,
  file: { name: string; kind: 'markdown' | 'text'; text: string } | undefined,
): Html {
  if (file === undefined) return html``;
  const dir = p.path;
  const body =
    file.kind === 'markdown'
      ? html`<div class="markdown">${renderMarkdown(file.text, { org: p.org, repo: p.repo, rev: p.rev, dir })}</div>`
      : html`<pre class="readme-text">${file.text}</pre>`;
  const path = dir === '' ? file.name : `${dir}/${file.name}`;
  return html`<section class="readme" aria-labelledby="readme-h">
<h2 id="readme-h" class="readme-name"><a href="${urls.blob(p.org, p.repo, p.rev, path)}">${file.name}</a></h2>
${body}
</section>`;
}
