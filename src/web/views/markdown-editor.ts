/**
 * The markdown editor of every text a user writes in a repository (issue and pull request
 * bodies and comments, release notes): a labelled textarea, and with script (the
 * `markdown-editor` island) Write and Preview buttons; Preview shows the text as the server
 * renders it (`POST /:org/:repo/-/preview`, the form's token with it). Without script it is the
 * plain textarea. `renderDiscussion` is how such text is shown once saved: the same renderer.
 */
import { field, type FormState } from '../context.ts';
import { html, type Html, type Renderable } from '../html.ts';
import { renderMarkdown } from '../markdown.ts';
import { urls } from '../urls.ts';

/** The island a page with an editor lists in its `scripts`. */
export const EDITOR_SCRIPT = 'markdown-editor';

/** Longest text the preview renders (the issue, pull request and release bodies' own cap). */
export const PREVIEW_MAX_CHARS = 100_000;

/** A repository as the editor and the renderer need it. */
export type DiscussionRepo = { org: string; name: string; default_branch: string };

export type EditorOptions = {
  repo: DiscussionRepo;
  name: string;
  label: string;
  value: string;
  rows?: number;
  maxlength?: number;
  hint?: Renderable;
  /** The textarea's id (default `f-<name>`): two editors on one page need their own. */
  id?: string;
};

export function markdownEditor(o: EditorOptions): Html {
  const id = o.id ?? `f-${o.name}`;
  const hintId = `${id}-hint`;
  const hint = o.hint ?? 'Markdown: **bold**, _italic_, `code`, lists, links and code blocks.';
  return html`<div class="field md-editor" data-preview="${urls.preview(o.repo.org, o.repo.name)}">
<label for="${id}">${o.label}</label>
<div class="md-modes" role="group" aria-label="${o.label}: write or preview" hidden>
<button type="button" class="md-mode" data-mode="write" aria-pressed="true" aria-controls="${id}">Write</button>
<button type="button" class="md-mode" data-mode="preview" aria-pressed="false" aria-controls="${id}-preview">Preview</button>
</div>
<textarea id="${id}" name="${o.name}" rows="${o.rows ?? 8}" maxlength="${o.maxlength ?? PREVIEW_MAX_CHARS}" aria-describedby="${hintId}">${o.value}</textarea>
<div class="md-preview" id="${id}-preview" role="region" aria-label="Preview of ${o.label}" aria-live="polite" hidden></div>
<p class="hint" id="${hintId}">${hint}</p>
</div>`;
}

/** An editor's text as sent (browsers send a textarea's line ends as CRLF: stored as LF). */
export function editorText(values: FormState['values'], name: string): string {
  return field(values, name).replace(/\r\n?/g, '\n');
}

/** Saved markdown text of a repository (relative links and images resolve at its default branch). */
export function renderDiscussion(repo: DiscussionRepo, text: string): Html {
  const place = { org: repo.org, repo: repo.name, rev: repo.default_branch, dir: '' };
  return html`<div class="markdown">${renderMarkdown(text, place)}</div>`;
}
