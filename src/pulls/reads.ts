import { ApiError } from '../http/errors.ts';
import type { RepoHandle, RepoTarget } from '../domain/repo.ts';
import { isDbId } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import type { TextSource } from '../db/search.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import type { CompareEnds, ParsedCompare } from '../repos/compare.ts';
import type { LogEntry } from '../vcs/reader.ts';
import * as db from './repository.ts';
import type { PullRow, StoredCheck } from './repository.ts';
import { pullCommentJson, pullJson, type ListPullsQuery, type PullJson } from './schemas.ts';
import type { PullsDeps } from './service.ts';

/**
 * Reading pull requests: lists by status, one with its comments, and the JSON of rows. Open and
 * closed pull requests answer live mergeability (`Mergeability.read`, within its time budget,
 * all of a page at once); merged ones, and ones whose refs are gone, the last known.
 */
export class PullReads {
  private readonly d: PullsDeps;

  constructor(deps: PullsDeps) {
    this.d = deps;
  }

  /** The repository of a route's target, as pull requests work on it. */
  repo(t: RepoTarget): Promise<RepoHandle> {
    return this.d.repos.handle(t);
  }

  async list(t: RepoTarget, q: ListPullsQuery): Promise<Page<PullJson>> {
    const em = this.d.em();
    const total = await db.countByStatus(em, t.repo.id, q.status);
    const offset = offsetOf(q);
    const page = { total, page: q.page, perPage: q.per_page };
    if (total <= offset) return { ...page, items: [] };
    const rows = await db.page(em, t.repo.id, q.status, q.per_page, offset);
    return { ...page, items: await this.json(em, await this.repo(t), rows, true) };
  }

  /** The pull request with all its comments (`[]` when none). */
  async detail(t: RepoTarget, number: number): Promise<PullJson> {
    const em = this.d.em();
    const row = await this.find(em, t.repo.id, number, false);
    const [pull] = await this.json(em, await this.repo(t), [row], true);
    const comments = row.comment_count === 0 ? [] : await db.comments(em, row.id);
    const authors = await this.d.users.refs(
      comments.map((c) => c.author_id),
      em,
    );
    const { created_at, updated_at, closed_at, ...head } = pull!;
    return {
      ...head,
      comments: comments.map((c) => pullCommentJson(c, authors)),
      created_at,
      updated_at,
      closed_at,
    };
  }

  /**
   * The two commits a pull request's commits and files lie between: while it is open, the heads
   * its source and target name now (the recorded one of a ref that is gone); once closed or
   * merged, the heads it recorded (a merged one: the source head it merged and the target head
   * before the merge).
   */
  async ends(t: RepoTarget, number: number): Promise<{ repo: RepoHandle; ends: CompareEnds }> {
    const repo = await this.repo(t);
    const row = await this.find(this.d.em(), repo.id, number, false);
    let head = row.head_commit;
    let base = row.base_commit;
    if (row.status === 'open') {
      const [sh, th] = await this.d.mergeability.heads(repo, row.source_ref, row.target_ref);
      head = sh ?? head;
      base = th ?? base;
    }
    return { repo, ends: { base, head } };
  }

  /** A page of the pull request's commits (those of its source its target lacks), oldest first. */
  async commits(t: RepoTarget, number: number, q: PageQuery): Promise<Page<LogEntry>> {
    const { repo, ends } = await this.ends(t, number);
    return this.d.compare.commits(repo, ends, q);
  }

  /** The pull request's files: the diff from the merge base of its ends to its head. */
  async files(t: RepoTarget, number: number): Promise<ParsedCompare> {
    const { repo, ends } = await this.ends(t, number);
    return this.d.compare.files(repo, ends);
  }

  /** The pull request `number` of the repository (404 when there is none); `lock` for a change. */
  async find(em: Db, repoId: number, number: number, lock: boolean): Promise<PullRow> {
    const row = isDbId(number) ? await db.pullByNumber(em, repoId, number, lock) : undefined;
    if (row === undefined) throw ApiError.notFound('pull request');
    return row;
  }

  /** Full-text search of the pull requests (title and body). */
  readonly search: TextSource = db.textSearch(() => this.d.em());

  /** The pull requests of these numbers as the list shows them (live mergeability), in the order given. */
  async byNumbers(t: RepoTarget, numbers: readonly number[]): Promise<PullJson[]> {
    const em = this.d.em();
    const rows = await db.byNumbers(em, t.repo.id, numbers);
    if (rows.length === 0) return [];
    return this.json(em, await this.repo(t), rows, true);
  }

  /** Rows to JSON with their users; `live`: open and closed ones with mergeability computed now. */
  async json(em: Db, repo: RepoHandle, rows: readonly PullRow[], live: boolean): Promise<PullJson[]> {
    if (rows.length === 0) return [];
    const users = await this.d.users.refs(
      rows.flatMap((r) => [r.author_id, r.merged_by]),
      em,
    );
    const checks: readonly StoredCheck[] = live ? await this.liveChecks(repo, rows) : rows;
    const statuses = await this.d.checks?.checks(
      em,
      repo.id,
      rows.map((r, i) => ({ targetRef: r.target_ref, head: checks[i]!.head_commit })),
    );
    return rows.map((r, i) => ({
      ...pullJson(r, repo.driver.constants.refType, users, checks[i]),
      ...(statuses === undefined ? {} : { checks: statuses[i]! }),
    }));
  }

  /** Open and closed rows' mergeability now (their refs resolved with one VCS call); merged: stored. */
  private async liveChecks(repo: RepoHandle, rows: readonly PullRow[]): Promise<StoredCheck[]> {
    const pending = rows.filter((r) => r.status !== 'merged');
    const pairs = pending.map((r) => ({ source: r.source_ref, target: r.target_ref }));
    const answers = await this.d.mergeability.readMany(repo, pairs);
    const byRow = new Map(pending.map((r, i) => [r, answers[i]!]));
    return rows.map((r) => {
      const live = byRow.get(r);
      return live?.ok === true ? live.check : r;
    });
  }
}
