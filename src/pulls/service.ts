import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Db } from '../db/query.ts';
import type {
  DomainEvent,
  PullRequestEventType,
  PullRequestPayload,
  RepositoryRef,
} from '../events/catalog.ts';
import { emitEvents } from '../events/outbox.ts';
import type { RepoHandle } from '../domain/repo.ts';
import type { Trigger } from '../pipelines/model.ts';
import type { PipelinesService } from '../pipelines/service.ts';
import type { ProtectionsService } from '../protection/service.ts';
import type { RepoChanges } from '../repos/changes.ts';
import type { CompareService } from '../repos/compare.ts';
import type { ReposService } from '../repos/service.ts';
import type { StatusesService } from '../statuses/service.ts';
import { userRefJson } from '../users/schemas.ts';
import type { UsersService } from '../users/service.ts';
import type { Vcs } from '../vcs/index.ts';
import { PullMerges } from './merge.ts';
import type { Mergeability } from './mergeability.ts';
import { PullReads } from './reads.ts';
import { PullSync } from './sync.ts';
import { PullWrites } from './writes.ts';

export type PullsDeps = {
  em: () => EntityManager;
  log: Logger;
  users: Pick<UsersService, 'refs' | 'get'>;
  repos: Pick<ReposService, 'handle'>;
  /** The one repository-change path (merges run as its mutation). */
  changes: Pick<RepoChanges, 'change'>;
  vcs: Pick<Vcs, 'ops'>;
  /** Commits and files between two commits (a pull request's range). */
  compare: Pick<CompareService, 'commits' | 'files'>;
  mergeability: Mergeability;
  /** CI: pipelines for `pull_request` triggers, in the caller's transaction. */
  ci: Pick<PipelinesService, 'trigger'>;
  /** Commit statuses: the records' `checks` and the merge gate (absent: no checks, no gate). */
  checks?: Pick<StatusesService, 'checks' | 'mergeBlock'>;
  /** Protected refs: a merge and `delete_source` obey the rules a push obeys. */
  protections: Pick<ProtectionsService, 'rulesOf'>;
};

/**
 * Pull requests, split by use case: `reads` (lists, one with comments, mergeability on read),
 * `writes` (create, update, comment), `merges` (merge through the repository-change path) and
 * `sync` (what a push or merge means for open pull requests: new source heads, merges; the
 * `pulls` listener of `RepoChanges`, inside the change's transaction).
 */
export class PullsService {
  readonly reads: PullReads;
  readonly writes: PullWrites;
  readonly merges: PullMerges;
  readonly sync: PullSync;

  constructor(deps: PullsDeps) {
    this.reads = new PullReads(deps);
    this.writes = new PullWrites(deps, this.reads);
    this.sync = new PullSync(deps, this.reads);
    this.merges = new PullMerges(deps, this.reads, this.sync);
  }
}

/** Writes a `pull_request.*` event in the caller's transaction. */
export async function emitPull(
  tx: Db,
  users: PullsDeps['users'],
  repository: RepositoryRef,
  senderId: number | null,
  type: PullRequestEventType,
  payload: Omit<PullRequestPayload, 'sender' | 'repository'>,
): Promise<void> {
  const s = senderId === null ? undefined : (await users.refs([senderId], tx)).get(senderId);
  const event: DomainEvent<PullRequestEventType> = {
    type,
    repoId: repository.id,
    senderId,
    payload: {
      ...payload,
      sender: s === undefined ? null : userRefJson(s),
      repository,
    },
  };
  await emitEvents(tx, [event]);
}

/** `pull_request` CI triggers in a savepoint: a failing trigger keeps the caller's writes. */
export async function triggerCi(
  tx: Db,
  deps: Pick<PullsDeps, 'ci' | 'log'>,
  repo: RepoHandle,
  triggers: readonly Trigger[],
): Promise<void> {
  if (triggers.length === 0) return;
  try {
    await tx.transactional((sp) => deps.ci.trigger(sp, repo, triggers));
  } catch (err) {
    deps.log.error({ err, repo: repo.id }, 'pull request CI triggers failed');
  }
}
