import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ApiError } from '../http/errors.ts';
import { nonBlank } from '../http/input.ts';
import type { Access, AuthUser, OrgRef, RepoRef } from '../http/auth.ts';
import { offsetOf, pageQuery, type Page } from '../http/pagination.ts';
import type { DomainEvent, IssueEventType, IssuePayload } from '../events/catalog.ts';
import { emitEvents } from '../events/outbox.ts';
import { isUniqueViolation, userRefJson } from '../users/service.ts';
import type { UserRefJson } from '../users/schemas.ts';
import type { CommentJson, IssueJson, IssueLabelJson, LabelJson } from './schemas.ts';

// ---------------------------------------------------------------------------------------------
// Request schemas
// ---------------------------------------------------------------------------------------------

export const SEVERITIES = ['none', 'low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];
export const ISSUE_STATES = ['new', 'open', 'closed'] as const;
export type IssueState = (typeof ISSUE_STATES)[number];

/** Severity is case-insensitive on input and stored lowercase. */
export const severitySchema = z
  .string()
  .toLowerCase()
  .pipe(z.enum(SEVERITIES, { message: `must be one of ${SEVERITIES.join(', ')} (case-insensitive)` }))
  .meta({ enum: [...SEVERITIES], description: 'case-insensitive' });

const titleSchema = z.string().trim().min(1, 'must not be empty').max(1000).meta(nonBlank);
const textBody = z.string().max(100_000);
const labelName = z.string().trim().min(1, 'must not be empty').max(100).meta(nonBlank);

/** An assignee reference: a user id, a display name, or both (then naming the same member). */
export const assigneeRef = z
  .object({
    user_id: z.number().int().positive().max(2_147_483_647).optional(),
    display_name: z.string().trim().min(1).max(255).meta(nonBlank).optional(),
  })
  .strict()
  .refine((a) => a.user_id !== undefined || a.display_name !== undefined, {
    message: 'give user_id, display_name or both',
  })
  .meta({ minProperties: 1 });
export type AssigneeRef = z.infer<typeof assigneeRef>;

export const createIssueBody = z
  .object({
    title: titleSchema,
    body: textBody.optional(),
    severity: severitySchema.optional(),
    labels: z.array(labelName).max(100).optional(),
    assignees: z.array(assigneeRef).max(1000).optional(),
  })
  .strict();
export type CreateIssueBody = z.infer<typeof createIssueBody>;

export const updateIssueBody = z
  .object({
    title: titleSchema.optional(),
    body: textBody.optional(),
    state: z.enum(['open', 'closed']).optional(),
    severity: severitySchema.optional(),
  })
  .strict();
export type UpdateIssueBody = z.infer<typeof updateIssueBody>;

export const commentBody = z
  .object({ body: textBody.refine((b) => b.trim() !== '', 'must not be empty').meta(nonBlank) })
  .strict();
export const addLabelBody = z.object({ name: labelName }).strict();

export const createLabelBody = z
  .object({
    name: labelName,
    color: z.string().regex(/^#[0-9A-Fa-f]{6}$/, 'must be "#" followed by 6 hex digits'),
    description: z.string().max(1000).optional(),
  })
  .strict();
export type CreateLabelBody = z.infer<typeof createLabelBody>;

export const ISSUE_SORTS = ['newest', 'oldest', 'updated', 'comments'] as const;
export const listIssuesQuery = pageQuery().extend({
  state: z.enum(['new', 'open', 'closed', 'active', 'all']).default('open'),
  severity: severitySchema.optional(),
  label: z.string().min(1).max(100).optional(),
  assignee: z.string().min(1).max(255).optional(),
  author: z.string().min(1).max(255).optional(),
  q: z.string().max(255).optional(),
  sort: z.enum(ISSUE_SORTS).default('newest'),
});
export type ListIssuesQuery = z.infer<typeof listIssuesQuery>;

// ---------------------------------------------------------------------------------------------
// Rows and JSON
// ---------------------------------------------------------------------------------------------

export type Target = { org: OrgRef; repo: RepoRef };
export type LabelScope = 'admin' | 'org' | 'repo';

type IssueRow = {
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
  created_at: Date;
  updated_at: Date;
};
const ISSUE_COLUMNS = `i.id, i.repo_id, i.number, i.title, i.body, i.state, i.severity, i.author_id,
  i.label_ids, i.assignee_ids, i.comment_count, i.created_at, i.updated_at`;

type UserRow = { id: number; username: string; display_name: string; avatar_url: string };
type LabelRow = { id: number; name: string; color: string; scope: LabelScope; description: string };
type CommentRow = { id: number; body: string; author_id: number | null; created_at: Date };

const iso = (d: Date | string): string => new Date(d).toISOString();
const userRef = (u: UserRow): UserRefJson =>
  userRefJson({ id: u.id, username: u.username, displayName: u.display_name, avatarUrl: u.avatar_url });

function labelJson(l: LabelRow): IssueLabelJson {
  return { id: l.id, name: l.name, color: l.color, scope: l.scope };
}
function catalogLabelJson(l: LabelRow): LabelJson {
  return { ...labelJson(l), description: l.description };
}

/** A PostgreSQL integer array literal for a `?::int[]` parameter (MikroORM expands JS arrays). */
const intArray = (ids: readonly number[]): string => `{${ids.map((n) => Math.trunc(n)).join(',')}}`;
const textArray = (values: readonly string[]): string =>
  `{${values.map((v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
/** Escapes LIKE wildcards so `q` is a plain substring (backslash is PostgreSQL's default LIKE escape). */
const likeEscape = (s: string): string => s.replace(/[\\%_]/g, (m) => `\\${m}`);

/** Most specific scope first when one name exists at several scopes. */
const SCOPE_RANK = `case l.scope when 'repo' then 0 when 'org' then 1 else 2 end`;
const CATALOG_WHERE = `(l.scope = 'admin' or (l.scope = 'org' and l.org_id = ?) or (l.scope = 'repo' and l.repo_id = ?))`;

const SORT_SQL: Record<(typeof ISSUE_SORTS)[number], string> = {
  newest: 'i.number desc',
  oldest: 'i.number asc',
  updated: 'i.updated_at desc, i.number desc',
  comments: 'i.comment_count desc, i.number desc',
};

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

/**
 * The issue tracker: issues, comments, labels (with the admin/org/repo catalog) and assignees.
 *
 * State machine (spec "Issue states"):
 * - create without assignees -> `new`; with assignees -> `open`;
 * - the first comment or the first assignee on a `new` issue -> `open`;
 * - `state: "closed"` from `new` or `open` -> `closed` (closing a `new` issue is allowed: an
 *   author may withdraw an untriaged report), `state: "open"` from `closed` -> `open`
 *   (reopen), and from `new` -> `open` (triage, as in the earlier variant, no event);
 *   both only for the issue author or an org owner (403 otherwise). Setting the current state
 *   again changes nothing.
 *
 * Permissions: reading follows repository visibility (`issues:read`); every write needs
 * `issues:write` on a repository the caller can see. Creating, commenting, labelling,
 * assigning and setting severity are open to any such caller (GitHub-like: org membership is
 * not required on a public repository); title, body and state only to the author or an org
 * owner.
 *
 * Every change and its outbox event commit in one transaction; an issue being changed is locked
 * (`for update`) so concurrent changes (cap checks, state transitions) serialize.
 */
export class IssuesService {
  private readonly em: () => EntityManager;
  private readonly maxAssignees: number;

  constructor(deps: { em: () => EntityManager; maxAssignees: number }) {
    this.em = deps.em;
    this.maxAssignees = deps.maxAssignees;
  }

  // ----- label catalog -----------------------------------------------------------------------

  /** The merged catalog of a repository: admin, org and repo labels, the most specific per name. */
  async catalog(t: Target): Promise<LabelJson[]> {
    const rows = await this.em().execute<LabelRow[]>(
      `select * from (
         select distinct on (lower(l.name)) l.id, l.name, l.color, l.scope, l.description
           from labels l where ${CATALOG_WHERE}
          order by lower(l.name), ${SCOPE_RANK}) c
        order by lower(c.name)`,
      [t.org.id, t.repo.id],
    );
    return rows.map(catalogLabelJson);
  }

  async createLabel(
    scope: LabelScope,
    owner: { orgId?: number; repoId?: number },
    body: CreateLabelBody,
  ): Promise<LabelJson> {
    const orgId = scope === 'org' ? (owner.orgId ?? null) : null;
    const repoId = scope === 'repo' ? (owner.repoId ?? null) : null;
    const conflict = () => ApiError.conflict(`a ${scope} label named "${body.name}" already exists`);
    try {
      const [row] = await this.em().execute<LabelRow[]>(
        `insert into labels (scope, org_id, repo_id, name, color, description)
         values (?, ?, ?, ?, ?, ?) on conflict do nothing
         returning id, name, color, scope, description`,
        [scope, orgId, repoId, body.name, body.color.toLowerCase(), body.description ?? ''],
      );
      if (row === undefined) throw conflict();
      return catalogLabelJson(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw conflict();
      throw e;
    }
  }

  /** Resolves label names in the merged catalog; 404 naming the first unknown one. */
  private async resolveLabels(em: EntityManager, t: Target, names: readonly string[]): Promise<LabelRow[]> {
    if (names.length === 0) return [];
    const rows = await em.execute<LabelRow[]>(
      `select distinct on (lower(l.name)) l.id, l.name, l.color, l.scope, l.description
         from labels l
        where ${CATALOG_WHERE} and lower(l.name) = any(array(select lower(x) from unnest(?::text[]) x))
        order by lower(l.name), ${SCOPE_RANK}`,
      [t.org.id, t.repo.id, textArray(names)],
    );
    const byName = new Map(rows.map((r) => [r.name.toLowerCase(), r]));
    return names.map((n) => {
      const found = byName.get(n.toLowerCase());
      if (found === undefined) throw ApiError.notFound(`label "${n}"`);
      return found;
    });
  }

  // ----- reads -------------------------------------------------------------------------------

  /**
   * One page of issues. Every filter is a predicate on `issues` (labels and assignees are id
   * arrays with GIN indexes), so the planner combines indexes for any combination. The page is
   * read in two steps: the numbers (an index-only scan for the plain state lists, cheap even for
   * deep pages), then those rows. Without filters besides `state`, the total comes from the
   * per-state counts in `repo_counters` instead of a count scan.
   */
  async list(t: Target, q: ListIssuesQuery): Promise<Page<IssueJson>> {
    const em = this.em();
    const empty: Page<IssueJson> = { items: [], total: 0, page: q.page, perPage: q.per_page };
    const where: string[] = ['i.repo_id = ?'];
    const params: unknown[] = [t.repo.id];
    switch (q.state) {
      case 'new':
      case 'open':
      case 'closed':
        where.push('i.state = ?');
        params.push(q.state);
        break;
      case 'active':
        // The predicate of the partial `issues_active_*` indexes.
        where.push(`i.state <> 'closed'`);
        break;
      case 'all':
        break;
    }
    const stateOnly = where.length;
    if (q.severity !== undefined) {
      where.push('i.severity = ?');
      params.push(q.severity);
    }
    if (q.label !== undefined) {
      // Every label of that name the repository can see: normally one, but an issue may carry a
      // broader-scope label whose name a narrower scope defined later.
      const labels = await em.execute<{ id: number }[]>(
        `select l.id from labels l where ${CATALOG_WHERE} and lower(l.name) = lower(?)`,
        [t.org.id, t.repo.id, q.label],
      );
      if (labels.length === 0) return empty;
      where.push('i.label_ids && ?::int[]');
      params.push(intArray(labels.map((l) => l.id)));
    }
    if (q.assignee !== undefined) {
      const ids = await this.usersByDisplayName(em, q.assignee);
      if (ids.length === 0) return empty;
      where.push('i.assignee_ids && ?::int[]');
      params.push(intArray(ids));
    }
    if (q.author !== undefined) {
      const ids = await this.usersByDisplayName(em, q.author);
      if (ids.length === 0) return empty;
      where.push('i.author_id = any(?::int[])');
      params.push(intArray(ids));
    }
    if (q.q !== undefined && q.q !== '') {
      where.push('lower(i.title) like lower(?)');
      params.push(`%${likeEscape(q.q)}%`);
    }
    const whereSql = where.join(' and ');
    let total: number;
    if (where.length === stateOnly) {
      total = await this.stateCount(em, t.repo.id, q.state);
    } else {
      const [count] = await em.execute<{ n: number }[]>(
        `select count(*)::int as n from issues i where ${whereSql}`,
        params,
      );
      total = count?.n ?? 0;
    }
    const offset = offsetOf(q);
    if (total <= offset) return { ...empty, total };
    const numbers = await em.execute<{ number: number }[]>(
      `select i.number from issues i where ${whereSql} order by ${SORT_SQL[q.sort]} limit ? offset ?`,
      [...params, q.per_page, offset],
    );
    if (numbers.length === 0) return { ...empty, total };
    const rows = await em.execute<IssueRow[]>(
      `select ${ISSUE_COLUMNS} from issues i where i.repo_id = ? and i.number = any(?::int[])`,
      [t.repo.id, intArray(numbers.map((n) => n.number))],
    );
    const byNumber = new Map(rows.map((r) => [r.number, r]));
    const ordered = numbers.flatMap((n) => {
      const r = byNumber.get(n.number);
      return r === undefined ? [] : [r];
    });
    return { items: await this.hydrate(em, ordered), total, page: q.page, perPage: q.per_page };
  }

  private async stateCount(
    em: EntityManager,
    repoId: number,
    state: ListIssuesQuery['state'],
  ): Promise<number> {
    const [c] = await em.execute<{ issues_new: number; issues_open: number; issues_closed: number }[]>(
      'select issues_new, issues_open, issues_closed from repo_counters where repo_id = ?',
      [repoId],
    );
    if (c === undefined) return 0;
    switch (state) {
      case 'new':
        return c.issues_new;
      case 'open':
        return c.issues_open;
      case 'closed':
        return c.issues_closed;
      case 'active':
        return c.issues_new + c.issues_open;
      case 'all':
        return c.issues_new + c.issues_open + c.issues_closed;
    }
  }

  /**
   * Moves one issue between the per-state counts of `repo_counters`, in the transaction of the
   * change and under the issue row lock, so the counts never drift from the rows.
   */
  private async countState(
    tx: EntityManager,
    repoId: number,
    from: IssueState,
    to: IssueState,
  ): Promise<void> {
    if (from === to) return;
    await tx.execute(
      `update repo_counters set issues_${from} = issues_${from} - 1, issues_${to} = issues_${to} + 1
        where repo_id = ?`,
      [repoId],
    );
  }

  /** The issue with its comments (the `comments` key only when there are any). */
  async detail(t: Target, number: number): Promise<IssueJson> {
    const em = this.em();
    const row = await this.find(em, t.repo.id, number, false);
    const [issue] = await this.hydrate(em, [row]);
    if (row.comment_count === 0) return issue!;
    const comments = await em.execute<CommentRow[]>(
      'select id, body, author_id, created_at from issue_comments where issue_id = ? order by id',
      [row.id],
    );
    if (comments.length === 0) return issue!;
    const authors = await this.usersById(
      em,
      comments.map((c) => c.author_id),
    );
    const { created_at, updated_at, ...head } = issue!;
    return {
      ...head,
      comments: comments.map((c) => commentJson(c, authors)),
      created_at,
      updated_at,
    };
  }

  // ----- writes ------------------------------------------------------------------------------

  async create(t: Target, access: Access, body: CreateIssueBody): Promise<IssueJson> {
    const user = access.user('issues:write');
    const labelNames = body.labels ?? [];
    const lowered = labelNames.map((n) => n.toLowerCase());
    if (new Set(lowered).size !== lowered.length) {
      throw ApiError.validation('body.labels: must not repeat a label');
    }
    const refs = body.assignees ?? [];
    this.checkCap(refs.length);
    return this.em().transactional(async (tx) => {
      // Everything is validated before the first write, so a bad request creates nothing.
      const labels = await this.resolveLabels(tx, t, labelNames);
      const assignees: UserRow[] = [];
      for (const ref of refs) assignees.push(await this.resolveAssignee(tx, t.org.id, ref));
      if (new Set(assignees.map((a) => a.id)).size !== assignees.length) {
        throw ApiError.validation('body.assignees: must not repeat an assignee');
      }
      const state: IssueState = assignees.length > 0 ? 'open' : 'new';
      // The counter row is locked by this upsert until commit: concurrent creates in the same
      // repository queue here and get consecutive numbers (a rolled-back create frees its number).
      const [counter] = await tx.execute<{ n: number }[]>(
        `insert into repo_counters as c (repo_id, last_issue_number, issues_${state}) values (?, 1, 1)
         on conflict (repo_id) do update
           set last_issue_number = c.last_issue_number + 1, issues_${state} = c.issues_${state} + 1
         returning c.last_issue_number as n`,
        [t.repo.id],
      );
      const [row] = await tx.execute<IssueRow[]>(
        `insert into issues as i (repo_id, number, title, body, state, severity, author_id, label_ids, assignee_ids)
         values (?, ?, ?, ?, ?, ?, ?, ?::int[], ?::int[])
         returning ${ISSUE_COLUMNS}`,
        [
          t.repo.id,
          counter!.n,
          body.title,
          body.body ?? '',
          state,
          body.severity ?? 'none',
          user.id,
          intArray(labels.map((l) => l.id)),
          intArray(assignees.map((a) => a.id)),
        ],
      );
      const [issue] = await this.hydrate(tx, [row!]);
      await this.emit(tx, t, user, 'issue.opened', { action: 'opened', issue: issue! });
      return issue!;
    });
  }

  async update(t: Target, access: Access, number: number, body: UpdateIssueBody): Promise<IssueJson> {
    const user = access.user('issues:write');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      const privileged = body.title !== undefined || body.body !== undefined || body.state !== undefined;
      if (privileged && row.author_id !== user.id && (await access.roleIn(t.org.id)) !== 'owner') {
        throw ApiError.forbidden('only the issue author or an org owner may change title, body or state');
      }
      const sets: string[] = [];
      const params: unknown[] = [];
      const set = (col: string, value: unknown) => {
        sets.push(`${col} = ?`);
        params.push(value);
      };
      if (body.title !== undefined && body.title !== row.title) set('title', body.title);
      if (body.body !== undefined && body.body !== row.body) set('body', body.body);
      if (body.severity !== undefined && body.severity !== row.severity) set('severity', body.severity);
      let event: 'issue.closed' | 'issue.reopened' | undefined;
      if (body.state === 'closed' && row.state !== 'closed') {
        set('state', 'closed');
        sets.push('closed_at = now()');
        event = 'issue.closed';
      } else if (body.state === 'open' && row.state !== 'open') {
        set('state', 'open');
        sets.push('closed_at = null');
        if (row.state === 'closed') event = 'issue.reopened';
      }
      if (body.state !== undefined) await this.countState(tx, t.repo.id, row.state, body.state);
      let current = row;
      if (sets.length > 0) {
        const [updated] = await tx.execute<IssueRow[]>(
          `update issues i set ${sets.join(', ')}, updated_at = now() where id = ?
           returning ${ISSUE_COLUMNS}`,
          [...params, row.id],
        );
        current = updated!;
      }
      const [issue] = await this.hydrate(tx, [current]);
      if (event !== undefined) {
        await this.emit(tx, t, user, event, {
          action: event === 'issue.closed' ? 'closed' : 'reopened',
          issue: issue!,
        });
      }
      return issue!;
    });
  }

  async comment(t: Target, access: Access, number: number, text: string): Promise<CommentJson> {
    const user = access.user('issues:write');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      const [c] = await tx.execute<CommentRow[]>(
        `insert into issue_comments (issue_id, author_id, body) values (?, ?, ?)
         returning id, body, author_id, created_at`,
        [row.id, user.id, text],
      );
      // The first comment on a `new` issue opens it (current variant).
      const [updated] = await tx.execute<IssueRow[]>(
        `update issues i set comment_count = comment_count + 1, updated_at = now(),
                state = case when state = 'new' then 'open' else state end
          where id = ? returning ${ISSUE_COLUMNS}`,
        [row.id],
      );
      if (row.state === 'new') await this.countState(tx, t.repo.id, 'new', 'open');
      const authors = await this.usersById(tx, [user.id]);
      const comment = commentJson(c!, authors);
      const [issue] = await this.hydrate(tx, [updated!]);
      await this.emit(tx, t, user, 'issue.commented', { action: 'commented', issue: issue!, comment });
      return comment;
    });
  }

  async addLabel(t: Target, access: Access, number: number, name: string): Promise<IssueJson> {
    access.user('issues:write');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      const [label] = await this.resolveLabels(tx, t, [name]);
      if (row.label_ids.includes(label!.id)) return this.touched(tx, row, undefined);
      return this.touched(tx, row, { sql: 'label_ids = array_append(label_ids, ?)', params: [label!.id] });
    });
  }

  /** Removes a label by name (resolved among the issue's labels, most specific scope first). */
  async removeLabel(t: Target, access: Access, number: number, name: string): Promise<IssueJson> {
    access.user('issues:write');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      const [label] = await tx.execute<{ id: number }[]>(
        `select l.id from labels l where l.id = any(?::int[]) and lower(l.name) = lower(?)
          order by ${SCOPE_RANK} limit 1`,
        [intArray(row.label_ids), name],
      );
      if (label === undefined) throw ApiError.notFound(`label "${name}" on this issue`);
      return this.touched(tx, row, { sql: 'label_ids = array_remove(label_ids, ?)', params: [label.id] });
    });
  }

  async addAssignee(t: Target, access: Access, number: number, ref: AssigneeRef): Promise<IssueJson> {
    access.user('issues:write');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      const member = await this.resolveAssignee(tx, t.org.id, ref);
      if (row.assignee_ids.includes(member.id)) return this.touched(tx, row, undefined);
      this.checkCap(row.assignee_ids.length + 1);
      // The first assignee on a `new` issue opens it (current variant).
      if (row.state === 'new') await this.countState(tx, t.repo.id, 'new', 'open');
      return this.touched(tx, row, {
        sql: `assignee_ids = array_append(assignee_ids, ?), state = case when state = 'new' then 'open' else state end`,
        params: [member.id],
      });
    });
  }

  async removeAssignee(t: Target, access: Access, number: number, userId: number): Promise<IssueJson> {
    access.user('issues:write');
    if (!isDbId(userId)) throw ApiError.notFound('assignee on this issue');
    return this.em().transactional(async (tx) => {
      const row = await this.find(tx, t.repo.id, number, true);
      if (!row.assignee_ids.includes(userId)) throw ApiError.notFound('assignee on this issue');
      return this.touched(tx, row, { sql: 'assignee_ids = array_remove(assignee_ids, ?)', params: [userId] });
    });
  }

  // ----- helpers -----------------------------------------------------------------------------

  private checkCap(n: number): void {
    if (n > this.maxAssignees) {
      throw ApiError.validation(`an issue may have at most ${this.maxAssignees} assignees`);
    }
  }

  /** Applies a change (with `updated_at`), if any, and returns the enriched issue. */
  private async touched(
    tx: EntityManager,
    row: IssueRow,
    change: { sql: string; params: unknown[] } | undefined,
  ): Promise<IssueJson> {
    let current = row;
    if (change !== undefined) {
      const [updated] = await tx.execute<IssueRow[]>(
        `update issues i set ${change.sql}, updated_at = now() where id = ? returning ${ISSUE_COLUMNS}`,
        [...change.params, row.id],
      );
      current = updated!;
    }
    const [issue] = await this.hydrate(tx, [current]);
    return issue!;
  }

  private async find(em: EntityManager, repoId: number, number: number, lock: boolean): Promise<IssueRow> {
    if (!isDbId(number)) throw ApiError.notFound('issue');
    const [row] = await em.execute<IssueRow[]>(
      `select ${ISSUE_COLUMNS} from issues i where i.repo_id = ? and i.number = ?${lock ? ' for update' : ''}`,
      [repoId, number],
    );
    if (row === undefined) throw ApiError.notFound('issue');
    return row;
  }

  /**
   * An assignee must be a member of the repository's organization: 404 for an unknown user or a
   * non-member, 409 when a display name alone matches several members, and 400 when `user_id`
   * and `display_name` are both given but name different members.
   */
  private async resolveAssignee(em: EntityManager, orgId: number, ref: AssigneeRef): Promise<UserRow> {
    const cols = 'u.id, u.username, u.display_name, u.avatar_url';
    if (ref.user_id !== undefined) {
      const [member] = await em.execute<UserRow[]>(
        `select ${cols} from org_members m join users u on u.id = m.user_id
          where m.org_id = ? and u.id = ?`,
        [orgId, ref.user_id],
      );
      if (member === undefined) throw ApiError.notFound(`assignee (user ${ref.user_id}) among org members`);
      if (
        ref.display_name !== undefined &&
        member.display_name.toLowerCase() !== ref.display_name.toLowerCase()
      ) {
        throw ApiError.validation(
          `assignee: user_id ${ref.user_id} and display_name "${ref.display_name}" name different members`,
        );
      }
      return member;
    }
    const name = ref.display_name ?? '';
    const members = await em.execute<UserRow[]>(
      `select ${cols} from org_members m join users u on u.id = m.user_id
        where m.org_id = ? and lower(u.display_name) = lower(?) order by u.id limit 2`,
      [orgId, name],
    );
    if (members.length === 0) throw ApiError.notFound(`assignee "${name}" among org members`);
    if (members.length > 1) {
      throw ApiError.conflict(`display_name "${name}" matches several members; give user_id`);
    }
    return members[0]!;
  }

  private async usersByDisplayName(em: EntityManager, name: string): Promise<number[]> {
    const rows = await em.execute<{ id: number }[]>(
      'select id from users where lower(display_name) = lower(?)',
      [name],
    );
    return rows.map((r) => r.id);
  }

  private async usersById(em: EntityManager, ids: readonly (number | null)[]): Promise<Map<number, UserRow>> {
    const wanted = [...new Set(ids.filter((i): i is number => i !== null))];
    if (wanted.length === 0) return new Map();
    const rows = await em.execute<UserRow[]>(
      'select id, username, display_name, avatar_url from users where id = any(?::int[])',
      [intArray(wanted)],
    );
    return new Map(rows.map((u) => [u.id, u]));
  }

  /** Issue rows to JSON with authors, labels and assignees, in two queries for any page size. */
  private async hydrate(em: EntityManager, rows: readonly IssueRow[]): Promise<IssueJson[]> {
    if (rows.length === 0) return [];
    const users = await this.usersById(em, [
      ...rows.map((r) => r.author_id),
      ...rows.flatMap((r) => r.assignee_ids),
    ]);
    const labelIds = [...new Set(rows.flatMap((r) => r.label_ids))];
    const labels =
      labelIds.length === 0
        ? []
        : await em.execute<LabelRow[]>(
            `select id, name, color, scope, description from labels where id = any(?::int[])
              order by lower(name), id`,
            [intArray(labelIds)],
          );
    return rows.map((r) => {
      const author = r.author_id === null ? undefined : users.get(r.author_id);
      const mine = new Set(r.label_ids);
      return {
        id: r.id,
        number: r.number,
        title: r.title,
        body: r.body,
        state: r.state,
        severity: r.severity,
        ...(author === undefined ? {} : { author: userRef(author) }),
        labels: labels.filter((l) => mine.has(l.id)).map(labelJson),
        assignees: r.assignee_ids.flatMap((id) => {
          const u = users.get(id);
          return u === undefined ? [] : [userRef(u)];
        }),
        created_at: iso(r.created_at),
        updated_at: iso(r.updated_at),
      };
    });
  }

  /** Writes an `issue.*` event in the caller's transaction: `{action, issue, sender, repository, ...}`. */
  private async emit(
    tx: EntityManager,
    t: Target,
    sender: AuthUser,
    type: IssueEventType,
    payload: Omit<IssuePayload, 'sender' | 'repository'>,
  ): Promise<void> {
    const senders = await this.usersById(tx, [sender.id]);
    const s = senders.get(sender.id);
    const event: DomainEvent<IssueEventType> = {
      type,
      repoId: t.repo.id,
      senderId: sender.id,
      payload: {
        ...payload,
        sender: s === undefined ? { id: sender.id, username: sender.username } : userRef(s),
        repository: { id: t.repo.id, name: t.repo.name, org: t.org.name },
      },
    };
    await emitEvents(tx, [event]);
  }
}

function commentJson(c: CommentRow, authors: Map<number, UserRow>): CommentJson {
  const author = c.author_id === null ? undefined : authors.get(c.author_id);
  return {
    id: c.id,
    body: c.body,
    ...(author === undefined ? {} : { author: userRef(author) }),
    created_at: iso(c.created_at),
  };
}

/** A positive value that fits a PostgreSQL `integer` (path numbers and ids). */
const isDbId = (n: number): boolean => Number.isSafeInteger(n) && n >= 1 && n <= 2_147_483_647;
