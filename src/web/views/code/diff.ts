/**
 * A changeset's files: the list at the top (paths with their counts, links to the files below),
 * each file's block (its lines with old and new numbers), and the collapsed block of a file that
 * is not shown inline (its header, a "Load diff" button for the `diff` island, a link to a page
 * of its own).
 */
import type { DiffFile } from '../../diff-files.ts';
import type { ParsedDiff } from '../../../vcs/diff-files.ts';
import { html, type Html } from '../../html.ts';
import { urls } from '../../urls.ts';

export type DiffPlace = { org: string; repo: string; commit: string };

const STATUS: Record<DiffFile['status'], string> = {
  added: 'added',
  deleted: 'deleted',
  modified: 'changed',
  renamed: 'renamed',
};

/** The path, a renamed file's with where it came from. */
function pathText(f: DiffFile): Html {
  return f.previousPath === undefined ? html`${f.path}` : html`${f.previousPath} → ${f.path}`;
}

function counts(f: DiffFile): Html {
  return html`<span class="counts"><span class="add">+${f.added}<span class="visually-hidden"> added</span></span> <span class="del">−${f.removed}<span class="visually-hidden"> removed</span></span></span>`;
}

/** Above this many files the list starts closed (the first diffs stay near the top of the page). */
const LIST_OPEN_MAX = 50;

export function fileList(files: readonly DiffFile[]): Html {
  if (files.length === 0) return html`<p class="empty">No files changed.</p>`;
  return html`<details class="diff-list"${files.length <= LIST_OPEN_MAX ? html` open` : ''}>
<summary>${files.length} ${files.length === 1 ? 'file' : 'files'} changed</summary>
<ul class="plain">${files.map((f) => html`<li><a href="#file-${f.index}">${pathText(f)}</a> <span class="muted">${STATUS[f.status]}</span> ${counts(f)}</li>`)}</ul>
</details>`;
}

/** The file's lines as a table: hunk headers, then each line with its old and new number. */
export function diffLines(f: DiffFile): Html {
  const rows: Html[] = [];
  let a = 0;
  let b = 0;
  const row = (cls: string, old: number | '', now: number | '', line: string) =>
    html`<tr${cls === '' ? '' : html` class="${cls}"`}><td class="ln">${old}</td><td class="ln">${now}</td><td class="dc"><code>${line}</code></td></tr>
`;
  for (const line of f.lines) {
    const c = line.charAt(0);
    if (c === '@') {
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      a = Number(m?.[1] ?? 0);
      b = Number(m?.[2] ?? 0);
      rows.push(row('hunk', '', '', line));
    } else if (c === '+') rows.push(row('add', '', b++, line));
    else if (c === '-') rows.push(row('del', a++, '', line));
    else if (c === '\\') rows.push(row('note', '', '', line));
    else rows.push(row('', a++, b++, line));
  }
  return html`<table class="diff" role="presentation"><tbody>${rows}</tbody></table>`;
}

/** Why a file has no lines to show, or its lines. */
export function fileBody(place: DiffPlace, f: DiffFile): Html {
  const raw = (label: string) =>
    f.status === 'deleted'
      ? ''
      : html` <a href="${urls.raw(place.org, place.repo, place.commit, f.path)}">${label}</a>`;
  if (f.tooLarge)
    return html`<p class="file-note">Not shown: too large.${raw('View the file at this commit')}</p>`;
  if (f.binary) return html`<p class="file-note">Binary file changed.${raw('Download it')}</p>`;
  if (f.lines.length === 0)
    return html`<p class="file-note">${f.mode === undefined ? 'No changes to the content.' : html`Mode changed: ${f.mode}.`}</p>`;
  return diffLines(f);
}

function fileHead(place: DiffPlace, f: DiffFile, level: 'h2' | 'h3'): Html {
  const name =
    f.status === 'deleted'
      ? html`<span class="path">${f.path}</span>`
      : html`<a class="path" href="${urls.blob(place.org, place.repo, place.commit, f.path)}">${pathText(f)}</a>`;
  const heading =
    level === 'h2'
      ? html`<h2 id="file-${f.index}-h">${name}</h2>`
      : html`<h3 id="file-${f.index}-h">${name}</h3>`;
  return html`<div class="diff-head">${heading}<span class="muted">${STATUS[f.status]}</span>${f.mode === undefined ? '' : html`<span class="muted">mode ${f.mode}</span>`}${counts(f)}</div>`;
}

/** A file's block, its lines inline or collapsed (`fileUrl`: its own page; `fragmentUrl`: what the island loads). */
export function fileBlock(
  place: DiffPlace,
  f: DiffFile,
  inline: boolean,
  links: { fileUrl: string; fragmentUrl: string },
  level: 'h2' | 'h3' = 'h3',
): Html {
  const body = inline
    ? fileBody(place, f)
    : html`<div class="diff-collapsed">
<p>${f.added + f.removed} changed ${f.added + f.removed === 1 ? 'line' : 'lines'} not shown. <a href="${links.fileUrl}">Show this file's diff on its own page</a></p>
<button type="button" class="secondary load-diff" data-src="${links.fragmentUrl}" hidden>Load diff</button>
</div>`;
  return html`<section class="diff-file" id="file-${f.index}" aria-labelledby="file-${f.index}-h">
${fileHead(place, f, level)}
<div class="diff-body" tabindex="-1">${body}</div>
</section>`;
}

/** Inline at most this many files, diff lines in all, and changed lines in one file. */
const INLINE_FILES = 20;
const INLINE_LINES = 2000;
const INLINE_FILE_CHANGES = 800;

/**
 * The blocks of a diff's files: the first ones inline (about 20 files or 2,000 diff lines,
 * whichever comes first; a file of more than 800 changed lines never), the others collapsed, to
 * be loaded one by one (`links`: a file's page and fragment), so a large diff shows its first
 * file at once and never renders every file up front.
 */
export function fileBlocks(
  place: DiffPlace,
  files: readonly DiffFile[],
  links: (index: number) => { fileUrl: string; fragmentUrl: string },
): Html {
  let shown = 0;
  let lines = 0;
  const blocks = files.map((f) => {
    const inline = shown < INLINE_FILES && lines < INLINE_LINES && f.added + f.removed <= INLINE_FILE_CHANGES;
    if (inline) {
      shown++;
      lines += f.lines.length;
    }
    return fileBlock(place, f, inline, links(f.index));
  });
  return html`<div class="diff-files">${blocks}</div>`;
}

/** What the diff's caps left out, said above its files. */
export function diffNotes(parsed: Pick<ParsedDiff, 'cut' | 'truncated'>): Html {
  if (parsed.cut)
    return html`<p class="flash warn">The diff is cut at its size limit: files after the last one below are not shown.</p>`;
  if (parsed.truncated)
    return html`<p class="flash warn">Some files are not shown: too large. Files past the size limit of the whole diff may be missing from the list.</p>`;
  return html``;
}
