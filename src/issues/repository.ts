import { Assignments, byNumbersIn, count, first, one, type Db } from '../db/query.ts';
import { intArray, likeEscape, textArray } from '../db/sql.ts';
import { textSource, type TextSource } from '../db/search.ts';
import type { IssueSort, IssueState, LabelScope, Severity, StateFilter } from './schemas.ts';

/**
 * The queries of the issue tracker: `issues`, `issue_comments`, `labels` and the per-state counts
 * in `repo_counters`. An issue's labels and assignees are id arrays on its row (GIN-indexed), so
 * every list filter is a predicate on `issues`.
 */

export type IssueRow = {
  id: number;
  repo_id: number;
  number: number;
  title: string;
  body: string;
  state: IssueState;
  severity: Severity;
  author_id: number | null;
  label_ids: number[];
  assignee_ids: number[];
  comment_count: number;
  created_at: Date | string;
  updated_at: Date | string;
};
export type LabelRow = { id: number; name: string; color: string; scope: LabelScope; description: string };
export type CommentRow = { id: number; body: string; author_id: number | null; created_at: Date | string };

const ISSUE = `i.id, i.repo_id, i.number, i.title, i.body, i.state, i.severity, i.author_id,
  i.label_ids, i.assignee_ids, i.comment_count, i.created_at, i.updated_at`;
/** The columns of a `LabelRow` (`labels l`). */
export const LABEL = 'l.id, l.name, l.color, l.scope, l.description';
const COMMENT = 'id, body, author_id, created_at';

// ----- labels ------------------------------------------------------------------------------------

/** Most specific scope first when one name exists at several scopes. */
export const SCOPE_RANK = `case l.scope when 'repo' then 0 when 'org' then 1 else 2 end`;
/** The labels a repository can use: site-wide, its organization's and its own. */
export const CATALOG = `(l.scope = 'admin' or (l.scope = 'org' and l.org_id = ?) or (l.scope = 'repo' and l.repo_id = ?))`;
export type CatalogOf = { orgId: number; repoId: number };

/** The merged catalog: the most specific label per (case-insensitive) name, by name. */
export function catalog(db: Db, c: CatalogOf): Promise<LabelRow[]> {
  return db.execute<LabelRow[]>(
    `select * from (
       select distinct on (lower(l.name)) ${LABEL} from labels l where ${CATALOG}
        order by lower(l.name), ${SCOPE_RANK}) c
      order by lower(c.name)`,
    [c.orgId, c.repoId],
  );
}

/** Inserts a label; undefined when its scope already has one of that name. */
export function insertLabel(
  db: Db,
  l: {
    scope: LabelScope;
    orgId: number | null;
    repoId: number | null;
    name: string;
    color: string;
    description: string;
  },
): Promise<LabelRow | undefined> {
  return first<LabelRow>(
    db,
    `insert into labels as l (scope, org_id, repo_id, name, color, description)
     values (?, ?, ?, ?, ?, ?) on conflict do nothing returning ${LABEL}`,
    [l.scope, l.orgId, l.repoId, l.name, l.color, l.description],
  );
}

/** The catalog's labels of these names (case-insensitive), the most specific per name. */
export function catalogNamed(db: Db, c: CatalogOf, names: readonly string[]): Promise<LabelRow[]> {
  return db.execute<LabelRow[]>(
    `select distinct on (lower(l.name)) ${LABEL} from labels l
      where ${CATALOG} and lower(l.name) = any(array(select lower(x) from unnest(?::text[]) x))
      order by lower(l.name), ${SCOPE_RANK}`,
    [c.orgId, c.repoId, textArray(names)],
  );
}

/**
 * Every catalog label of that name, at any scope: an issue may carry a broader-scope label whose
 * name a narrower scope defined later.
 */
export async function catalogIdsNamed(db: Db, c: CatalogOf, name: string): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    `select l.id from labels l where ${CATALOG} and lower(l.name) = lower(?)`,
    [c.orgId, c.repoId, name],
  );
  return rows.map((r) => r.id);
}

/** Labels by id, by name. */
export async function labelsByIds(db: Db, ids: readonly number[]): Promise<LabelRow[]> {
  if (ids.length === 0) return [];
  return db.execute<LabelRow[]>(
    `select ${LABEL} from labels l where l.id = any(?::int[]) order by lower(l.name), l.id`,
    [intArray(ids)],
  );
}

/** Among `ids`, the label of this name (case-insensitive), the most specific scope first. */
export async function labelNamedAmong(
  db: Db,
  ids: readonly number[],
  name: string,
): Promise<number | undefined> {
  const row = await first<{ id: number }>(
    db,
    `select l.id from labels l where l.id = any(?::int[]) and lower(l.name) = lower(?)
      order by ${SCOPE_RANK} limit 1`,
    [intArray(ids), name],
  );
  return row?.id;
}

// ----- per-state counts --------------------------------------------------------------------------

export type StateCounts = { issues_new: number; issues_open: number; issues_closed: number };

export function stateCounts(db: Db, repoId: number): Promise<StateCounts | undefined> {
  return first<StateCounts>(
    db,
    'select issues_new, issues_open, issues_closed from repo_counters where repo_id = ?',
    [repoId],
  );
}

/**
 * Counts a new issue in its state. `last_issue_number` follows the numbers the allocator hands
 * out, so a server of an earlier version (which allocated from it) continues the sequence.
 */
export async function countCreated(tx: Db, repoId: number, state: IssueState, number: number): Promise<void> {
  await tx.execute(
    `insert into repo_counters as c (repo_id, last_issue_number, issues_${state}) values (?, ?, 1)
     on conflict (repo_id) do update
       set last_issue_number = greatest(c.last_issue_number, excluded.last_issue_number),
           issues_${state} = c.issues_${state} + 1`,
    [repoId, number],
  );
}

/** Moves one issue between the per-state counts (call under the issue's row lock). */
export async function countMoved(tx: Db, repoId: number, from: IssueState, to: IssueState): Promise<void> {
  if (from === to) return;
  await tx.execute(
    `update repo_counters set issues_${from} = issues_${from} - 1, issues_${to} = issues_${to} + 1
      where repo_id = ?`,
    [repoId],
  );
}

// ----- issues ------------------------------------------------------------------------------------

/** What a list keeps; every part is optional but the repository and the state. */
export type IssueFilter = {
  repoId: number;
  state: StateFilter;
  severity?: Severity | undefined;
  /** Any of these labels. */
  labelIds?: readonly number[] | undefined;
  /** Any of these assignees. */
  assigneeIds?: readonly number[] | undefined;
  /** Any of these authors. */
  authorIds?: readonly number[] | undefined;
  /** A case-insensitive substring of the title. */
  q?: string | undefined;
};

const SORT_SQL: Record<IssueSort, string> = {
  newest: 'i.number desc',
  oldest: 'i.number asc',
  updated: 'i.updated_at desc, i.number desc',
  comments: 'i.comment_count desc, i.number desc',
};

function where(f: IssueFilter): { sql: string; params: unknown[] } {
  const parts: string[] = ['i.repo_id = ?'];
  const params: unknown[] = [f.repoId];
  switch (f.state) {
    case 'new':
    case 'open':
    case 'closed':
      parts.push('i.state = ?');
      params.push(f.state);
      break;
    case 'active':
      // The predicate of the partial `issues_active_*` indexes.
      parts.push(`i.state <> 'closed'`);
      break;
    case 'all':
      break;
  }
  const add = (sql: string, value: unknown) => {
    parts.push(sql);
    params.push(value);
  };
  if (f.severity !== undefined) add('i.severity = ?', f.severity);
  if (f.labelIds !== undefined) add('i.label_ids && ?::int[]', intArray(f.labelIds));
  if (f.assigneeIds !== undefined) add('i.assignee_ids && ?::int[]', intArray(f.assigneeIds));
  if (f.authorIds !== undefined) add('i.author_id = any(?::int[])', intArray(f.authorIds));
  if (f.q !== undefined && f.q !== '') add('lower(i.title) like lower(?)', `%${likeEscape(f.q)}%`);
  return { sql: parts.join(' and '), params };
}

export function countMatching(db: Db, f: IssueFilter): Promise<number> {
  const w = where(f);
  return count(db, `select count(*)::int as n from issues i where ${w.sql}`, w.params);
}

/**
 * One page of matching issues in two steps: the numbers (an index-only scan for the plain state
 * lists, cheap even for deep pages), then those rows, in page order.
 */
export async function page(
  db: Db,
  f: IssueFilter,
  sort: IssueSort,
  limit: number,
  offset: number,
): Promise<IssueRow[]> {
  const w = where(f);
  const numbers = await db.execute<{ number: number }[]>(
    `select i.number from issues i where ${w.sql} order by ${SORT_SQL[sort]} limit ? offset ?`,
    [...w.params, limit, offset],
  );
  return byNumbers(
    db,
    f.repoId,
    numbers.map((n) => n.number),
  );
}

/** The issues of these numbers, in the order given (numbers naming no issue are left out). */
export function byNumbers(db: Db, repoId: number, numbers: readonly number[]): Promise<IssueRow[]> {
  return byNumbersIn<IssueRow>(db, `select ${ISSUE} from issues i`, 'i', repoId, numbers);
}

/** Full-text search of the repository's issues (title and body; see db/search.ts). */
export function textSearch(em: () => Db): TextSource {
  return textSource('issues', em);
}

/** The issue `number` of the repository; `lock` holds its row until the transaction ends. */
export function issueByNumber(
  db: Db,
  repoId: number,
  number: number,
  lock: boolean,
): Promise<IssueRow | undefined> {
  return first<IssueRow>(
    db,
    `select ${ISSUE} from issues i where i.repo_id = ? and i.number = ?${lock ? ' for update' : ''}`,
    [repoId, number],
  );
}

export function insertIssue(
  tx: Db,
  i: Pick<
    IssueRow,
    | 'repo_id'
    | 'number'
    | 'title'
    | 'body'
    | 'state'
    | 'severity'
    | 'author_id'
    | 'label_ids'
    | 'assignee_ids'
  >,
): Promise<IssueRow> {
  return one<IssueRow>(
    tx,
    `insert into issues as i (repo_id, number, title, body, state, severity, author_id, label_ids, assignee_ids)
     values (?, ?, ?, ?, ?, ?, ?, ?::int[], ?::int[])
     returning ${ISSUE}`,
    [
      i.repo_id,
      i.number,
      i.title,
      i.body,
      i.state,
      i.severity,
      i.author_id,
      intArray(i.label_ids),
      intArray(i.assignee_ids),
    ],
  );
}

/** An issue change: the fields to set (`closed_at` follows `state`). */
export type IssueChange = {
  title?: string;
  body?: string;
  severity?: Severity;
  state?: 'open' | 'closed';
  addLabel?: number;
  removeLabel?: number;
  /** Assigning also opens a `new` issue. */
  addAssignee?: number;
  removeAssignee?: number;
};

/** Applies a change and `updated_at`. */
export function updateIssue(tx: Db, id: number, c: IssueChange): Promise<IssueRow> {
  const a = new Assignments();
  if (c.title !== undefined) a.add('title = ?', c.title);
  if (c.body !== undefined) a.add('body = ?', c.body);
  if (c.severity !== undefined) a.add('severity = ?', c.severity);
  if (c.state !== undefined) {
    a.add('state = ?', c.state);
    a.add(c.state === 'closed' ? 'closed_at = now()' : 'closed_at = null');
  }
  if (c.addLabel !== undefined) a.add('label_ids = array_append(label_ids, ?)', c.addLabel);
  if (c.removeLabel !== undefined) a.add('label_ids = array_remove(label_ids, ?)', c.removeLabel);
  if (c.addAssignee !== undefined) {
    a.add('assignee_ids = array_append(assignee_ids, ?)', c.addAssignee);
    a.add(`state = case when state = 'new' then 'open' else state end`);
  }
  if (c.removeAssignee !== undefined) a.add('assignee_ids = array_remove(assignee_ids, ?)', c.removeAssignee);
  a.add('updated_at = now()');
  return one<IssueRow>(tx, `update issues i set ${a.sql} where id = ? returning ${ISSUE}`, [...a.params, id]);
}

// ----- comments ----------------------------------------------------------------------------------

/** Adds a comment; the issue counts it, and a `new` issue opens. */
/** Adds a comment; with `opens`, the first comment on a `new` issue also opens it. */
export async function insertComment(
  tx: Db,
  issueId: number,
  authorId: number,
  body: string,
  opens: boolean,
): Promise<{ comment: CommentRow; issue: IssueRow }> {
  const comment = await one<CommentRow>(
    tx,
    `insert into issue_comments (issue_id, author_id, body) values (?, ?, ?) returning ${COMMENT}`,
    [issueId, authorId, body],
  );
  const issue = await one<IssueRow>(
    tx,
    `update issues i set comment_count = comment_count + 1, updated_at = now(),
            state = case when state = 'new' and ? then 'open' else state end
      where id = ? returning ${ISSUE}`,
    [opens, issueId],
  );
  return { comment, issue };
}

export function comments(db: Db, issueId: number): Promise<CommentRow[]> {
  return db.execute<CommentRow[]>(`select ${COMMENT} from issue_comments where issue_id = ? order by id`, [
    issueId,
  ]);
}
