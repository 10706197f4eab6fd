/**
 * Markdown (READMEs, `.md` files) rendered with markdown-it: raw HTML is shown as text
 * (`html: false`), bare URLs become links, and markdown-it's `validateLink` refuses
 * `javascript:`, `vbscript:`, `file:` and non-image `data:` URLs. Relative links go to the
 * repository's file and directory pages at the same revision, relative images to its raw route;
 * an image from anywhere else is not loaded (the page's CSP would refuse it, and report it): it is
 * shown as a link.
 */
import MarkdownIt from 'markdown-it';
import { escapeHtml, trusted, type Html } from './html.ts';
import { urls } from './urls.ts';

/** Where a markdown file lives: relative links are resolved from its directory at `rev`. */
export type MarkdownPlace = { org: string; repo: string; rev: string; dir: string };

/** Markdown files larger than this are shown as text. */
export const MARKDOWN_MAX_BYTES = 1024 * 1024;

const md = new MarkdownIt({ html: false, linkify: true, typographer: false });

const SCHEME = /^[a-z][a-z0-9+.-]*:/i;

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A link's target inside the repository (`dir`-relative or `/`-rooted), its path normalised; undefined when it leaves. */
function repoPath(dir: string, link: string): string | undefined {
  const rooted = link.startsWith('/');
  const parts = rooted || dir === '' ? [] : dir.split('/');
  for (const seg of decode(link).split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (parts.length === 0) return undefined;
      parts.pop();
    } else parts.push(seg);
  }
  return parts.join('/');
}

/** `href` as a page of the repository, or unchanged when it is absolute or an anchor. */
function resolveLink(href: string, p: MarkdownPlace): string {
  if (href === '' || href.startsWith('#') || href.startsWith('//') || SCHEME.test(href)) return href;
  const hashAt = href.indexOf('#');
  const hash = hashAt >= 0 ? href.slice(hashAt) : '';
  const noHash = hashAt >= 0 ? href.slice(0, hashAt) : href;
  const q = noHash.indexOf('?');
  const pathPart = q >= 0 ? noHash.slice(0, q) : noHash;
  const target = repoPath(p.dir, pathPart);
  if (target === undefined) return urls.tree(p.org, p.repo, p.rev);
  const dirLike = pathPart.endsWith('/') || target === '';
  return (dirLike ? urls.tree(p.org, p.repo, p.rev, target) : urls.blob(p.org, p.repo, p.rev, target)) + hash;
}

type Env = { place: MarkdownPlace };

md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  const t = tokens[idx]!;
  const href = t.attrGet('href');
  if (href !== null) t.attrSet('href', resolveLink(String(href), (env as Env).place));
  return self.renderToken(tokens, idx, options);
};

md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const t = tokens[idx]!;
  const place = (env as Env).place;
  const src = String(t.attrGet('src') ?? '');
  const alt = self.renderInlineAsText(t.children ?? [], options, env);
  const title = String(t.attrGet('title') ?? '');
  const titleAttr = title === '' ? '' : ` title="${escapeHtml(title)}"`;
  if (/^data:image\//i.test(src)) {
    return `<img src="${escapeHtml(src)}" alt="${escapeHtml(alt)}"${titleAttr}>`;
  }
  if (src === '' || src.startsWith('//') || SCHEME.test(src)) {
    // another origin: not loaded, a link instead (markdown-it already dropped unsafe schemes)
    if (src === '') return escapeHtml(alt);
    return `<a class="external-image" href="${escapeHtml(src)}">${escapeHtml(alt === '' ? src : alt)}</a>`;
  }
  const q = src.search(/[?#]/);
  const target = repoPath(place.dir, q >= 0 ? src.slice(0, q) : src);
  if (target === undefined || target === '') return escapeHtml(alt);
  const raw = urls.raw(place.org, place.repo, place.rev, target);
  return `<img src="${escapeHtml(raw)}" alt="${escapeHtml(alt)}"${titleAttr}>`;
};

/** The markdown text as HTML, links resolved from `place`. */
export function renderMarkdown(text: string, place: MarkdownPlace): Html {
  return trusted(md.render(text, { place }));
}

/** How a README of this name is shown: rendered markdown, plain text, or not a README. */
export function readmeKind(name: string): 'markdown' | 'text' | undefined {
  const n = name.toLowerCase();
  if (n === 'readme.md' || n === 'readme.markdown') return 'markdown';
  if (n === 'readme' || n === 'readme.txt') return 'text';
  return undefined;
}

/** A file shown rendered on its page (with a link to its source). */
export function isMarkdownFile(path: string): boolean {
  return /\.(md|markdown)$/i.test(path);
}
