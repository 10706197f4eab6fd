/**
 * The views of one issue: its thread (the opening text and the comments, rendered markdown), the
 * comment form, and the side column of labels, assignees, severity, pin and state, each with the
 * forms the viewer may use (none for someone signed out).
 */
import { SEVERITIES, type CommentJson, type IssueJson, type LabelJson } from '../../issues/schemas.ts';
import { html, type Html } from '../html.ts';
import { urls } from '../urls.ts';
import { actionButton, csrf, input } from './forms.ts';
import { timeAgo } from './common.ts';
import { userLink } from './issues.ts';
import { labelChip } from './labels.ts';
import { markdownEditor, renderDiscussion, type DiscussionRepo } from './markdown-editor.ts';

/** What the side column may offer this viewer. */
export type IssueControls = {
  formToken: string;
  /** The merged catalog (labels to add). */
  catalog: readonly LabelJson[];
  /** The organization's members (assignees to choose), or undefined: a username is typed. */
  members: readonly { id: number; username: string }[] | undefined;
  /** Close and reopen (the issue's author or an organization owner). */
  canChangeState: boolean;
  /** Pin and unpin (organization members), with the repository's pins and the cap. */
  pins: { pinned: boolean; count: number; max: number } | undefined;
};

function post(
  repo: DiscussionRepo,
  number: number,
  what: string,
  c: IssueControls,
  label: string,
  opts: Parameters<typeof actionButton>[3] = {},
): Html {
  return actionButton(`${urls.issue(repo.org, repo.name, number)}/${what}`, c.formToken, label, opts);
}

function entry(
  repo: DiscussionRepo,
  id: string,
  who: IssueJson['author'],
  at: string,
  verb: string,
  text: string,
): Html {
  const body =
    text.trim() === '' ? html`<p class="empty">No description given.</p>` : renderDiscussion(repo, text);
  return html`<article class="comment" id="${id}">
<header class="comment-head">${userLink(who)} ${verb} ${timeAgo(at)}</header>
<div class="comment-body">${body}</div>
</article>`;
}

export function issueThread(repo: DiscussionRepo, issue: IssueJson): Html {
  const comments: readonly CommentJson[] = issue.comments ?? [];
  return html`${entry(repo, 'issue-body', issue.author, issue.created_at, 'opened this issue', issue.body)}
${comments.map((c) => entry(repo, `comment-${c.id}`, c.author, c.created_at, 'commented', c.body))}`;
}

/** The comment form (`value`: a refused comment's text). */
export function commentForm(repo: DiscussionRepo, number: number, formToken: string, value: string): Html {
  return html`<form method="post" action="${urls.issue(repo.org, repo.name, number)}/comments" class="comment-form" aria-labelledby="comment-h">
<h2 id="comment-h">Add a comment</h2>
${csrf(formToken)}
<input type="hidden" name="form" value="comment">
${markdownEditor({ repo, name: 'body', label: 'Comment', value, rows: 6 })}
<button type="submit" class="primary">Comment</button>
</form>`;
}

function labelsBox(repo: DiscussionRepo, issue: IssueJson, c: IssueControls | undefined): Html {
  const chips = issue.labels.map(
    (l) =>
      html`<li>${labelChip(l)}${c === undefined ? '' : post(repo, issue.number, 'labels/remove', c, '✕', { hidden: { name: l.name }, ariaLabel: `Remove the label ${l.name}` })}</li>`,
  );
  const have = new Set(issue.labels.map((l) => l.name.toLowerCase()));
  const addable = c?.catalog.filter((l) => !have.has(l.name.toLowerCase())) ?? [];
  const add =
    c === undefined || addable.length === 0
      ? ''
      : html`<form method="post" action="${urls.issue(repo.org, repo.name, issue.number)}/labels" class="side-form">
${csrf(c.formToken)}
<label for="add-label" class="visually-hidden">Label to add</label>
<select id="add-label" name="name">${addable.map((l) => html`<option value="${l.name}">${l.name}</option>`)}</select>
<button type="submit" class="secondary">Add label</button>
</form>`;
  return html`<section aria-labelledby="labels-h">
<h2 id="labels-h">Labels</h2>
${issue.labels.length === 0 ? html`<p class="muted">None yet.</p>` : html`<ul class="chips">${chips}</ul>`}
${add}
</section>`;
}

function assigneesBox(repo: DiscussionRepo, issue: IssueJson, c: IssueControls | undefined): Html {
  const people = issue.assignees.map(
    (a) =>
      html`<li>${userLink(a)}${c === undefined ? '' : post(repo, issue.number, 'assignees/remove', c, '✕', { hidden: { user_id: String(a.id) }, ariaLabel: `Unassign ${a.username}` })}</li>`,
  );
  let add: Html = html``;
  if (c !== undefined) {
    const action = `${urls.issue(repo.org, repo.name, issue.number)}/assignees`;
    const assigned = new Set(issue.assignees.map((a) => a.id));
    const choices = c.members?.filter((m) => !assigned.has(m.id));
    const control =
      choices === undefined
        ? input({
            name: 'username',
            label: 'Username to assign',
            id: 'add-assignee',
            maxlength: 255,
            hint: 'A member of the organization.',
          })
        : choices.length === 0
          ? undefined
          : html`<label for="add-assignee" class="visually-hidden">Member to assign</label>
<select id="add-assignee" name="username">${choices.map((m) => html`<option value="${m.username}">${m.username}</option>`)}</select>`;
    if (control !== undefined) {
      add = html`<form method="post" action="${action}" class="side-form">
${csrf(c.formToken)}
${control}
<button type="submit" class="secondary">Assign</button>
</form>`;
    }
  }
  return html`<section aria-labelledby="assignees-h">
<h2 id="assignees-h">Assignees</h2>
${issue.assignees.length === 0 ? html`<p class="muted">Nobody yet.</p>` : html`<ul class="people">${people}</ul>`}
${add}
</section>`;
}

function severityBox(repo: DiscussionRepo, issue: IssueJson, c: IssueControls | undefined): Html {
  const form =
    c === undefined
      ? html`<p>${issue.severity}</p>`
      : html`<form method="post" action="${urls.issue(repo.org, repo.name, issue.number)}/severity" class="side-form">
${csrf(c.formToken)}
<label for="set-severity" class="visually-hidden">Severity</label>
<select id="set-severity" name="severity">${SEVERITIES.map((s) => html`<option value="${s}"${s === issue.severity ? html` selected` : ''}>${s}</option>`)}</select>
<button type="submit" class="secondary">Set severity</button>
</form>`;
  return html`<section aria-labelledby="severity-h">
<h2 id="severity-h">Severity</h2>
${form}
</section>`;
}

function manageBox(repo: DiscussionRepo, issue: IssueJson, c: IssueControls | undefined): Html {
  if (c === undefined) return html``;
  const pin =
    c.pins === undefined
      ? ''
      : html`<p>${
          c.pins.pinned
            ? post(repo, issue.number, 'unpin', c, 'Unpin issue')
            : post(repo, issue.number, 'pin', c, 'Pin issue')
        }</p>
<p class="hint">${c.pins.count} of ${c.pins.max} pinned in this repository.</p>`;
  const state = !c.canChangeState
    ? ''
    : issue.state === 'closed'
      ? html`<p>${post(repo, issue.number, 'state', c, 'Reopen issue', { hidden: { state: 'open' } })}</p>`
      : html`<p>${post(repo, issue.number, 'state', c, 'Close issue', { hidden: { state: 'closed' }, danger: true })}</p>`;
  if (pin === '' && state === '') return html``;
  return html`<section aria-labelledby="manage-h">
<h2 id="manage-h">Manage</h2>
${pin}
${state}
</section>`;
}

/** The side column; `c` undefined for a viewer who is signed out (everything read-only). */
export function issueSide(repo: DiscussionRepo, issue: IssueJson, c: IssueControls | undefined): Html {
  return html`<aside class="side issue-side" aria-label="Issue details">
${labelsBox(repo, issue, c)}
${assigneesBox(repo, issue, c)}
${severityBox(repo, issue, c)}
${manageBox(repo, issue, c)}
</aside>`;
}
