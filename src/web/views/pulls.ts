/**
 * The views of pull requests: status and mergeability badges, the list, a pull request's head
 * (title, refs, its tabs), a comment, and the merge box (what merging would do, and for members
 * the form that merges).
 */
import type { PullJson } from '../../pulls/schemas.ts';
import type { LogEntry } from '../../vcs/reader.ts';
import { html, type Html } from '../html.ts';
import { renderMarkdown, type MarkdownPlace } from '../markdown.ts';
import { markdownEditor, type DiscussionRepo } from './markdown-editor.ts';
import { urls } from '../urls.ts';
import { timeAgo } from './common.ts';
import { csrf, textarea } from './forms.ts';
import { field, type FormState } from '../context.ts';

export type PullTab = 'conversation' | 'commits' | 'files';

const STATUS_LABEL: Record<PullJson['status'], string> = { open: 'Open', closed: 'Closed', merged: 'Merged' };

export function statusBadge(status: PullJson['status']): Html {
  return html`<span class="badge pr-${status}">${STATUS_LABEL[status]}</span>`;
}

const STATE_TEXT: Record<PullJson['mergeable_state'], string> = {
  clean: 'Can be merged',
  conflict: 'Conflicts',
  behind: 'Nothing to merge',
  empty: 'Changes no file',
  checking: 'Checking…',
};

export function stateBadge(state: PullJson['mergeable_state']): Html {
  return html`<span class="badge ms-${state}">${STATE_TEXT[state]}</span>`;
}

/** `source → target` as two ref badges. */
export function refPair(pull: Pick<PullJson, 'source_ref' | 'target_ref'>): Html {
  return html`<span class="badge branch">${pull.source_ref}</span> <span aria-hidden="true">→</span><span class="visually-hidden"> into </span> <span class="badge branch">${pull.target_ref}</span>`;
}

export function pullList(org: string, repo: string, items: readonly PullJson[], empty: string): Html {
  if (items.length === 0) return html`<p class="empty">${empty}</p>`;
  const row = (p: PullJson) => html`<li>
<div class="pr-line"><a class="pr-title" href="${urls.pull(org, repo, p.number)}">${p.title}</a> ${statusBadge(p.status)}${p.status === 'open' ? html` ${stateBadge(p.mergeable_state)}` : ''}</div>
<p class="meta">#${p.number} · ${refPair(p)} · opened ${timeAgo(p.created_at)}${p.author === undefined ? '' : html` by ${p.author.username}`}${p.comments_count === 0 ? '' : html` · ${p.comments_count} ${p.comments_count === 1 ? 'comment' : 'comments'}`}</p>
</li>`;
  return html`<ul class="pr-list">${items.map(row)}</ul>`;
}

/** The head of a pull request's pages: title, number, status, who wants what, and its tabs. */
export function pullHead(org: string, repo: string, pull: PullJson, tab: PullTab): Html {
  const tabs: { key: PullTab; href: string; label: Html }[] = [
    { key: 'conversation', href: urls.pull(org, repo, pull.number), label: html`Conversation` },
    {
      key: 'commits',
      href: urls.pull(org, repo, pull.number, 'commits'),
      label: html`Commits${pull.status === 'open' && pull.mergeable_state !== 'checking' ? html` <span class="count">${pull.commits_ahead}</span>` : ''}`,
    },
    { key: 'files', href: urls.pull(org, repo, pull.number, 'files'), label: html`Files changed` },
  ];
  const who = pull.author === undefined ? 'Someone' : pull.author.username;
  const what =
    pull.status === 'merged'
      ? html`${pull.merged_by?.username ?? 'Someone'} merged ${refPair(pull)} ${timeAgo(pull.merged_at)}`
      : html`${who} wants to merge ${refPair(pull)}`;
  return html`<div class="pr-head">
<h1 class="break">${pull.title} <span class="muted">#${pull.number}</span></h1>
<p class="meta">${statusBadge(pull.status)} ${what}</p>
<nav class="tabs sub" aria-label="Pull request">
<ul>${tabs.map((t) => html`<li><a href="${t.href}"${t.key === tab ? html` aria-current="page"` : ''}>${t.label}</a></li>`)}</ul>
</nav>
</div>`;
}

/** A body or comment: markdown, or a note that there is none. */
export function markdownBody(text: string, place: MarkdownPlace): Html {
  return text.trim() === ''
    ? html`<p class="muted">No description.</p>`
    : html`<div class="markdown">${renderMarkdown(text, place)}</div>`;
}

export function commentBox(
  c: { id: number; body: string; created_at: string; author?: { username: string } | undefined },
  place: MarkdownPlace,
): Html {
  return html`<article class="comment" id="comment-${c.id}" aria-labelledby="comment-${c.id}-h">
<header class="comment-head" id="comment-${c.id}-h"><strong>${c.author?.username ?? 'A former user'}</strong> commented ${timeAgo(c.created_at)}</header>
${markdownBody(c.body, place)}
</article>`;
}

/** The comment form (signed-in viewers). */
export function commentForm(repo: DiscussionRepo, action: string, token: string, state: FormState): Html {
  return html`<form method="post" action="${action}" class="card comment-form">
${csrf(token)}
${markdownEditor({ repo, name: 'comment', label: 'Add a comment', rows: 5, value: field(state.values, 'comment') })}
<p><button type="submit" class="button primary">Comment</button></p>
</form>`;
}

/** What merging would do now, and the form that merges (members, open pull requests). */
export function mergeBox(
  org: string,
  repo: string,
  pull: PullJson,
  opts: { member: boolean; token: string | undefined; state: FormState; keepsSource: string | undefined },
): Html {
  const box = urls.pull(org, repo, pull.number, 'merge-box');
  const s = pull.mergeable_state;
  const counts = html`<p class="meta">${pull.commits_ahead} ${pull.commits_ahead === 1 ? 'commit' : 'commits'} ahead of ${pull.target_ref}, ${pull.commits_behind} behind.</p>`;
  let summary: Html;
  switch (s) {
    case 'checking':
      summary = html`<p>Checking whether this can be merged… <a href="${urls.pull(org, repo, pull.number)}#merge">Check again</a></p>`;
      break;
    case 'conflict':
      summary = html`<p><strong>This pull request has conflicts.</strong> Merging ${pull.source_ref} into ${pull.target_ref} conflicts in ${pull.conflicted_files.length === 1 ? 'this file' : html`these ${pull.conflicted_files.length} files`}:</p>
<ul class="conflicts">${pull.conflicted_files.map((f) => html`<li><code>${f}</code></li>`)}</ul>
<p class="meta">Merge ${pull.target_ref} into ${pull.source_ref} and resolve them with your client, then push.</p>${counts}`;
      break;
    case 'behind':
      summary = html`<p><strong>Nothing to merge:</strong> ${pull.target_ref} already contains ${pull.source_ref}.</p>${counts}`;
      break;
    case 'empty':
      summary = html`<p><strong>Merging changes no file</strong> of ${pull.target_ref}; the merge would only record the commits.</p>${counts}`;
      break;
    case 'clean':
      summary = html`<p><strong>This pull request can be merged.</strong></p>${counts}`;
      break;
  }
  const form =
    opts.member && opts.token !== undefined && s !== 'conflict' && s !== 'behind'
      ? mergeForm(org, repo, pull, opts.token, opts.state, opts.keepsSource)
      : !opts.member
        ? html`<p class="meta">Only members of ${org} can merge.</p>`
        : '';
  // while checking, the `recheck` island loads the box again (aria-live: its answer is read out)
  const live = s === 'checking' ? html` data-recheck="${box}"` : '';
  return html`<section class="merge-box ms-${s}" id="merge" aria-labelledby="merge-h" aria-live="polite"${live}>
<h2 id="merge-h">Merge ${stateBadge(s)}</h2>
${summary}
${form}
</section>`;
}

function mergeForm(
  org: string,
  repo: string,
  pull: PullJson,
  token: string,
  state: FormState,
  keepsSource: string | undefined,
): Html {
  const refused = field(state.values, 'form') === 'merge';
  const style = refused ? field(state.values, 'style') : 'merge';
  const styles = [
    { value: 'merge', label: 'Merge commit', hint: 'fast-forward when the target has not moved on' },
    { value: 'ff-only', label: 'Fast-forward only', hint: 'refused when the target has moved on' },
    { value: 'squash', label: 'Squash', hint: 'one new commit with all the changes' },
  ];
  const radios = styles.map(
    (x) =>
      html`<div class="check"><input type="radio" id="f-style-${x.value}" name="style" value="${x.value}"${x.value === style ? html` checked` : ''}><label for="f-style-${x.value}">${x.label} <span class="muted">(${x.hint})</span></label></div>`,
  );
  const deleting =
    keepsSource === undefined
      ? html`<div class="check"><input type="checkbox" id="f-delete_source" name="delete_source" value="on"${refused && field(state.values, 'delete_source') === 'on' ? html` checked` : ''}><label for="f-delete_source">Delete ${pull.source_ref} after the merge</label></div>`
      : html`<p class="meta">${pull.source_ref} is ${keepsSource}: it stays after the merge.</p>`;
  return html`<form method="post" action="${urls.pull(org, repo, pull.number)}/merge" class="merge-form">
${csrf(token)}
<input type="hidden" name="form" value="merge">
<input type="hidden" name="expected_head" value="${pull.head_commit}">
<input type="hidden" name="expected_target_head" value="${pull.base_commit}">
<fieldset><legend>Merge style</legend>${radios}</fieldset>
${textarea({ name: 'message', label: 'Commit message', rows: 3, maxlength: 10_000, hint: html`Optional. Default: “Merge ${pull.source_ref} into ${pull.target_ref}”.` }, refused ? state : undefined)}
${deleting}
<p><button type="submit" class="button primary">Merge pull request</button></p>
</form>`;
}

/** A commit of a pull request or compare, linked to its changeset. */
export function commitLine(org: string, repo: string, c: LogEntry): Html {
  const href = urls.changeset(org, repo, c.id);
  return html`<li class="commit">
<div class="commit-main">
<p class="subject"><a href="${href}">${c.subject === '' ? '(no message)' : c.subject}</a></p>
<p class="meta"><span class="author">${c.author}</span> committed ${timeAgo(c.date)}</p>
</div>
<div class="commit-side"><a class="sha" href="${href}" aria-label="Changeset ${c.short_id}">${c.short_id}</a></div>
</li>`;
}
