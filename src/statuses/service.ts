import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Actor } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import type { Db } from '../db/query.ts';
import type { DomainEvent, RepositoryRef } from '../events/catalog.ts';
import { emitEvents } from '../events/outbox.ts';
import { ApiError } from '../http/errors.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import type { PipelineStatus } from '../pipelines/model.ts';
import type { ReposService } from '../repos/service.ts';
import { userRefJson } from '../users/schemas.ts';
import type { UsersService } from '../users/service.ts';
import { urls } from '../web/urls.ts';
import { checksOf, mergeBlock, requiredContexts, type CheckRule } from './checks.ts';
import * as db from './repository.ts';
import {
  PIPELINE_CONTEXT,
  statusJson,
  type ChecksJson,
  type CreateStatusBody,
  type StatusJson,
  type StatusRow,
  type StatusState,
} from './schemas.ts';

export type StatusesDeps = {
  em: () => EntityManager;
  log: Logger;
  users: Pick<UsersService, 'refs'>;
  repos: Pick<ReposService, 'handleById'>;
  baseUrl: () => string;
  /** The full id of the commit a revision (full or short id, ref name) names; undefined: none. */
  resolve: (t: RepoTarget, rev: string) => Promise<string | undefined>;
  /** The repository's protection rules (the required pipeline and contexts of each pattern). */
  rules: (db: Db, repoId: number) => Promise<CheckRule[]>;
};

/** A pipeline's status as a commit status: `cancelled` is an `error` (neither counts as passed). */
const PIPELINE_STATE: Record<PipelineStatus, StatusState> = {
  pending: 'pending',
  running: 'pending',
  success: 'success',
  failure: 'failure',
  error: 'error',
  cancelled: 'error',
};

/** One pull request to compute `checks` for: its target ref and its source head now. */
export type CheckTarget = { targetRef: string; head: string };

/**
 * Commit statuses: reported by clients (`create`) and by Triad's own pipelines (`recordPipelines`,
 * the pipelines' status hook), listed per commit, and summed up as a pull request's `checks` and
 * its merge gate (`mergeBlock`). Every status writes a `status` event in its transaction.
 */
export class StatusesService {
  private readonly d: StatusesDeps;

  constructor(deps: StatusesDeps) {
    this.d = deps;
  }

  private async commit(t: RepoTarget, rev: string): Promise<string> {
    const id = await this.d.resolve(t, rev).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) return undefined;
      throw e;
    });
    if (id === undefined) throw ApiError.notFound('commit');
    return id;
  }

  async create(t: RepoTarget, actor: Actor, rev: string, body: CreateStatusBody): Promise<StatusJson> {
    const commit = await this.commit(t, rev);
    const repository = { id: t.repo.id, name: t.repo.name, org: t.org.name };
    return this.d.em().transactional(async (tx) => {
      const row = await db.insertStatus(tx, t.repo.id, {
        commit,
        state: body.state,
        context: body.context,
        description: body.description ?? null,
        target_url: body.target_url ?? null,
        creatorId: actor.id,
      });
      return this.emit(tx, repository, row);
    });
  }

  /** A commit's statuses, paged: the latest of each context first, then older ones, newest first. */
  async list(t: RepoTarget, rev: string, q: PageQuery): Promise<Page<StatusJson>> {
    const commit = await this.commit(t, rev);
    const em = this.d.em();
    const total = await db.countForCommit(em, t.repo.id, commit);
    const page = { total, page: q.page, perPage: q.per_page };
    if (total <= offsetOf(q)) return { ...page, items: [] };
    const rows = await db.pageForCommit(em, t.repo.id, commit, q.per_page, offsetOf(q));
    const users = await this.d.users.refs(
      rows.map((r) => r.creator_id),
      em,
    );
    return { ...page, items: rows.map((r) => statusJson(r, users)) };
  }

  /** The `checks` of pull requests of one repository (one query for the rules, one for the statuses). */
  async checks(em: Db, repoId: number, pulls: readonly CheckTarget[]): Promise<ChecksJson[]> {
    if (pulls.length === 0) return [];
    const rules = await this.d.rules(em, repoId);
    const latest = await db.latestFor(
      em,
      repoId,
      pulls.map((p) => p.head),
    );
    return pulls.map((p) =>
      checksOf(
        requiredContexts(rules, p.targetRef),
        latest.filter((s) => s.commit === p.head),
      ),
    );
  }

  /** Why a merge of `head` into `targetRef` must wait (409 `checks_pending`/`checks_failed`), if it must. */
  async mergeBlock(em: Db, repoId: number, p: CheckTarget): Promise<ApiError | undefined> {
    const required = requiredContexts(await this.d.rules(em, repoId), p.targetRef);
    if (required.length === 0) return undefined;
    const block = mergeBlock(required, await db.latestFor(em, repoId, [p.head]));
    return block === undefined ? undefined : ApiError.mergeRefused(block.code, block.message);
  }

  /**
   * The pipelines' status hook, in the transaction that changed their status: each pipeline
   * whose state (as a commit status) differs from its commit's latest `triad/pipeline` status
   * reports a new one, with its `status` event. In a savepoint: a failure here is logged and
   * never undoes the pipeline's own change.
   */
  async recordPipelines(tx: Db, ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      await tx.transactional(async (sp) => {
        for (const p of await db.pipelineFacts(sp, ids)) {
          const repo = await this.d.repos.handleById(p.repo_id);
          const state = PIPELINE_STATE[p.status];
          const target = `${this.d.baseUrl()}${urls.pipeline(repo.org, repo.name, p.number)}`;
          const description = `pipeline #${p.number}: ${p.status}`;
          const last = await db.latestOf(sp, repo.id, p.commit_node, PIPELINE_CONTEXT);
          if (last?.state === state && last.target_url === target && last.description === description)
            continue;
          const row = await db.insertStatus(sp, repo.id, {
            commit: p.commit_node,
            state,
            context: PIPELINE_CONTEXT,
            description,
            target_url: target,
            creatorId: null,
          });
          await this.emit(sp, { id: repo.id, name: repo.name, org: repo.org }, row);
        }
      });
    } catch (err) {
      this.d.log.error({ err, pipelines: ids }, 'recording pipeline statuses failed');
    }
  }

  private async emit(tx: Db, repository: RepositoryRef, row: StatusRow): Promise<StatusJson> {
    const users = await this.d.users.refs([row.creator_id], tx);
    const status = statusJson(row, users);
    const sender = row.creator_id === null ? undefined : users.get(row.creator_id);
    const event: DomainEvent<'status'> = {
      type: 'status',
      repoId: repository.id,
      senderId: row.creator_id,
      payload: { status, sender: sender === undefined ? null : userRefJson(sender), repository },
    };
    await emitEvents(tx, [event]);
    return status;
  }
}
