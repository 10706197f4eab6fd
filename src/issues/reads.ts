import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { isDbId, isoTime } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import type { TextSource } from '../db/search.ts';
import { offsetOf, type Page } from '../http/pagination.ts';
import type { UsersService } from '../users/service.ts';
import { userRefJson } from '../users/schemas.ts';
import * as db from './repository.ts';
import type { IssueRow } from './repository.ts';
import { catalogOf } from './labels.ts';
import {
  commentJson,
  labelJson,
  optionalRef,
  type IssueJson,
  type ListIssuesQuery,
  type StateFilter,
} from './schemas.ts';

export type IssueUsers = Pick<UsersService, 'refs' | 'idsByDisplayName' | 'idsByName' | 'findByUsername'>;

/** Reading issues: lists with filters and sorts, one issue with its comments, and the JSON of rows. */
export class IssueReads {
  private readonly em: () => EntityManager;
  private readonly users: IssueUsers;

  constructor(deps: { em: () => EntityManager; users: IssueUsers }) {
    this.em = deps.em;
    this.users = deps.users;
  }

  /**
   * One page of issues. Every filter is a predicate on `issues` (labels and assignees are id
   * arrays with GIN indexes), so the planner combines indexes for any combination. Without
   * filters besides `state`, the total comes from the per-state counts instead of a count scan.
   */
  async list(t: RepoTarget, q: ListIssuesQuery): Promise<Page<IssueJson>> {
    const em = this.em();
    const empty: Page<IssueJson> = { items: [], total: 0, page: q.page, perPage: q.per_page };
    const filter: db.IssueFilter = { repoId: t.repo.id, state: q.state, severity: q.severity, q: q.q };
    if (q.label !== undefined) {
      filter.labelIds = await db.catalogIdsNamed(em, catalogOf(t), q.label);
      if (filter.labelIds.length === 0) return empty;
    }
    if (q.assignee !== undefined) {
      filter.assigneeIds = await this.users.idsByName(q.assignee);
      if (filter.assigneeIds.length === 0) return empty;
    }
    if (q.author !== undefined) {
      filter.authorIds = await this.users.idsByName(q.author);
      if (filter.authorIds.length === 0) return empty;
    }
    const stateOnly =
      q.severity === undefined &&
      q.label === undefined &&
      q.assignee === undefined &&
      q.author === undefined &&
      (q.q === undefined || q.q === '');
    const total = stateOnly
      ? await this.stateCount(em, t.repo.id, q.state)
      : await db.countMatching(em, filter);
    const offset = offsetOf(q);
    if (total <= offset) return { ...empty, total };
    const rows = await db.page(em, filter, q.sort, q.per_page, offset);
    return { items: await this.hydrate(em, rows), total, page: q.page, perPage: q.per_page };
  }

  private async stateCount(em: Db, repoId: number, state: StateFilter): Promise<number> {
    const c = await db.stateCounts(em, repoId);
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

  /** The issue with its comments (the `comments` key only when there are any). */
  async detail(t: RepoTarget, number: number): Promise<IssueJson> {
    const em = this.em();
    const row = await this.find(em, t.repo.id, number, false);
    const [issue] = await this.hydrate(em, [row]);
    if (row.comment_count === 0) return issue!;
    const comments = await db.comments(em, row.id);
    if (comments.length === 0) return issue!;
    const authors = await this.users.refs(
      comments.map((c) => c.author_id),
      em,
    );
    const { created_at, updated_at, ...head } = issue!;
    return {
      ...head,
      comments: comments.map((c) => commentJson(c, authors)),
      created_at,
      updated_at,
    };
  }

  /** The issue `number` of the repository (404 when there is none); `lock` for a change. */
  async find(em: Db, repoId: number, number: number, lock: boolean): Promise<IssueRow> {
    const row = isDbId(number) ? await db.issueByNumber(em, repoId, number, lock) : undefined;
    if (row === undefined) throw ApiError.notFound('issue');
    return row;
  }

  /** Full-text search of the issues (title and body). */
  readonly search: TextSource = db.textSearch(() => this.em());

  /** The issues of these numbers as the list shows them, in the order given. */
  async byNumbers(t: RepoTarget, numbers: readonly number[]): Promise<IssueJson[]> {
    const em = this.em();
    return this.hydrate(em, await db.byNumbers(em, t.repo.id, numbers));
  }

  /** Issue rows to JSON with authors, labels and assignees, in two queries for any page size. */
  async hydrate(em: Db, rows: readonly IssueRow[]): Promise<IssueJson[]> {
    if (rows.length === 0) return [];
    const users = await this.users.refs(
      [...rows.map((r) => r.author_id), ...rows.flatMap((r) => r.assignee_ids)],
      em,
    );
    const labels = await db.labelsByIds(em, [...new Set(rows.flatMap((r) => r.label_ids))]);
    return rows.map((r) => {
      const author = optionalRef(users, r.author_id);
      const mine = new Set(r.label_ids);
      return {
        id: r.id,
        number: r.number,
        title: r.title,
        body: r.body,
        state: r.state,
        severity: r.severity,
        ...(author === undefined ? {} : { author }),
        labels: labels.filter((l) => mine.has(l.id)).map(labelJson),
        assignees: r.assignee_ids.flatMap((id) => {
          const u = users.get(id);
          return u === undefined ? [] : [userRefJson(u)];
        }),
        created_at: isoTime(r.created_at),
        updated_at: isoTime(r.updated_at),
      };
    });
  }
}
