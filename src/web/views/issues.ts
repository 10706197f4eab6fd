/**
 * The views of the issue list: state, severity and label badges, one issue's row, the filter form
 * (a GET form: it works without script, and its address can be shared), the pinned issues' box.
 */
import {
  ISSUE_SORTS,
  SEVERITIES,
  type IssueJson,
  type IssueSort,
  type IssueState,
  type ListIssuesQuery,
  type Severity,
} from '../../issues/schemas.ts';
import type { UserRefJson } from '../../users/schemas.ts';
import { html, join, type Html } from '../html.ts';
import { urls } from '../urls.ts';
import { input, select } from './forms.ts';
import { timeAgo } from './common.ts';
import { labelChip } from './labels.ts';

const STATE_LABEL: Record<IssueState, string> = { new: 'New', open: 'Open', closed: 'Closed' };

export function stateBadge(state: IssueState): Html {
  return html`<span class="badge issue-state state-${state}">${STATE_LABEL[state]}</span>`;
}

export function severityBadge(severity: Severity): Html {
  if (severity === 'none') return html``;
  return html`<span class="badge severity severity-${severity}">Severity: ${severity}</span>`;
}

export function userLink(u: UserRefJson | undefined): Html {
  if (u === undefined) return html`<span class="muted">a removed user</span>`;
  return html`<a href="${urls.user(u.username)}">${u.username}</a>`;
}

/** The repository an issue view links in. */
export type IssuesRepo = { org: string; name: string };

function issueRow(r: IssuesRepo, i: IssueJson): Html {
  const assigned =
    i.assignees.length === 0
      ? ''
      : html` · assigned to ${join(
          i.assignees.map((a) => userLink(a)),
          ', ',
        )}`;
  return html`<li class="issue-row">
<div class="issue-line">${stateBadge(i.state)} <a class="issue-link" href="${urls.issue(r.org, r.name, i.number)}">${i.title}</a>
${i.labels.map(labelChip)} ${severityBadge(i.severity)}</div>
<p class="meta">#${i.number} opened ${timeAgo(i.created_at)} by ${userLink(i.author)}${assigned}</p>
</li>`;
}

export function issueList(r: IssuesRepo, items: readonly IssueJson[], filtered: boolean): Html {
  if (items.length === 0) {
    return html`<p class="empty">${filtered ? 'No issues match these filters.' : 'No issues here yet.'}</p>`;
  }
  return html`<ul class="issue-list">${items.map((i) => issueRow(r, i))}</ul>`;
}

/** The pinned issues above the list, in pin order (closed ones too, marked so). */
export function pinnedBox(r: IssuesRepo, pins: readonly IssueJson[]): Html {
  if (pins.length === 0) return html``;
  return html`<section class="pinned" aria-labelledby="pinned-h">
<h2 id="pinned-h">Pinned issues</h2>
<ol class="pinned-list">${pins.map(
    (i) => html`<li class="pinned-card"><a href="${urls.issue(r.org, r.name, i.number)}">${i.title}</a>
<p class="meta">${stateBadge(i.state)} #${i.number} ${severityBadge(i.severity)}</p></li>`,
  )}</ol>
</section>`;
}

/** The list page's state when none is asked for: new and open issues. */
export const PAGE_STATE = 'active';

const STATE_OPTIONS = [
  { value: 'active', label: 'New and open' },
  { value: 'open', label: 'Open' },
  { value: 'new', label: 'New' },
  { value: 'closed', label: 'Closed' },
  { value: 'all', label: 'All' },
];
const SORT_LABEL: Record<IssueSort, string> = {
  newest: 'Newest',
  oldest: 'Oldest',
  updated: 'Recently updated',
  comments: 'Most commented',
};

/** The filters of the API's list, as a GET form of the list page. */
export function filterForm(r: IssuesRepo, q: ListIssuesQuery, labelNames: readonly string[]): Html {
  const labels = [...labelNames];
  if (q.label !== undefined && !labels.some((n) => n.toLowerCase() === q.label!.toLowerCase())) {
    labels.push(q.label);
  }
  const labelValue = labels.find((n) => n.toLowerCase() === q.label?.toLowerCase()) ?? '';
  return html`<form method="get" action="${urls.issues(r.org, r.name)}" class="issue-filters" role="search" aria-label="Filter issues">
${input({ name: 'q', label: 'Title contains', type: 'search', value: q.q ?? '', maxlength: 255 })}
${select({ name: 'state', label: 'State', value: q.state, options: STATE_OPTIONS })}
${select({ name: 'label', label: 'Label', value: labelValue, options: [{ value: '', label: 'Any label' }, ...labels.map((n) => ({ value: n, label: n }))] })}
${select({ name: 'severity', label: 'Severity', value: q.severity ?? '', options: [{ value: '', label: 'Any severity' }, ...SEVERITIES.map((s) => ({ value: s, label: s }))] })}
${input({ name: 'assignee', label: 'Assignee', value: q.assignee ?? '', maxlength: 255, placeholder: 'username or display name' })}
${input({ name: 'author', label: 'Author', value: q.author ?? '', maxlength: 255, placeholder: 'username or display name' })}
${select({ name: 'sort', label: 'Sort', value: q.sort, options: ISSUE_SORTS.map((s) => ({ value: s, label: SORT_LABEL[s] })) })}
${q.per_page === 30 ? '' : html`<input type="hidden" name="per_page" value="${q.per_page}">`}
<div class="filter-actions"><button type="submit" class="primary">Filter</button> <a href="${urls.issues(r.org, r.name)}">Clear filters</a></div>
</form>`;
}

/** The list's query as the address of its pages (defaults left out). */
export function listQueryString(q: ListIssuesQuery): string {
  const u = new URLSearchParams();
  if (q.q !== undefined && q.q !== '') u.set('q', q.q);
  if (q.state !== PAGE_STATE) u.set('state', q.state);
  if (q.label !== undefined) u.set('label', q.label);
  if (q.severity !== undefined) u.set('severity', q.severity);
  if (q.assignee !== undefined) u.set('assignee', q.assignee);
  if (q.author !== undefined) u.set('author', q.author);
  if (q.sort !== 'newest') u.set('sort', q.sort);
  if (q.per_page !== 30) u.set('per_page', String(q.per_page));
  return u.toString();
}
