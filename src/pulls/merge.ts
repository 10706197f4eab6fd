import { ApiError } from '../http/errors.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoHandle, RepoTarget } from '../domain/repo.ts';
import { PushLockTimeout, type ChangeCause } from '../repos/changes.ts';
import { HG } from '../vcs/constants.ts';
import { RefNotFound, type MergeOutcome } from '../vcs/ops.ts';
import type { PullReads } from './reads.ts';
import * as db from './repository.ts';
import type { MergePullBody, PullJson } from './schemas.ts';
import type { PullsDeps } from './service.ts';
import { mergedCheck, type PullSync } from './sync.ts';
import type { Role } from '../domain/access.ts';
import { mergeRefusal, sourceKeptBy } from '../protection/merges.ts';

/** How long a merge waits for the repository's push lock. */
const LOCK_WAIT_MS = 60_000;

type Outcome = MergeOutcome | { kind: 'not_open' };

/** What the caller may do besides merging, as the route found it (the merge itself needs `pulls:write`). */
export type MergeRights = {
  /** The token could push here (`repo:write`, org member, its level reaching the repository). */
  push: boolean;
  /** The caller's role in the repository's organization (who may push under protection rules). */
  role: Role | undefined;
};

/**
 * Why `delete_source` leaves `ref` in place, or undefined when it may be deleted. The default
 * line is never deleted: the default branch (git, Fossil), and for Mercurial the mainline
 * bookmark `@` and a bookmark named like the default named branch (it would stand for that
 * branch). Protected refs (DESIGN.md section 11) keep the source the same way: a rule that does
 * not allow deletion, or that does not let the merging user push to it (`sourceKeptBy`).
 */
export function keptSource(repo: Pick<RepoHandle, 'vcs' | 'defaultBranch'>, ref: string): string | undefined {
  if (ref === repo.defaultBranch) return 'the default branch';
  if (repo.vcs === 'hg' && ref === HG.mainBookmark) return 'the mainline bookmark';
  return undefined;
}

/**
 * Merging a pull request. The merge runs as the mutation of `RepoChanges.change`, so the target's
 * `push` event, its CI pipelines and the readers' invalidation happen exactly as for a client
 * push; the pull request is marked `merged` (with `pull_request.merged`) in that same transaction
 * by `PullSync`, which receives the merge as the change's cause.
 * `delete_source` deletes (Fossil: closes) the source ref in the same change; it needs the right
 * to push (refused with 403 before anything changes) and never deletes the default line (the
 * merge goes ahead and the source stays, see `keptSource`).
 */
export class PullMerges {
  private readonly d: PullsDeps;
  private readonly reads: PullReads;
  private readonly sync: Pick<PullSync, 'markMerged'>;

  constructor(deps: PullsDeps, reads: PullReads, sync: Pick<PullSync, 'markMerged'>) {
    this.d = deps;
    this.reads = reads;
    this.sync = sync;
  }

  async merge(
    t: RepoTarget,
    actor: Actor,
    rights: MergeRights,
    number: number,
    body: MergePullBody,
  ): Promise<PullJson> {
    const repo = await this.reads.repo(t);
    const row = await this.reads.find(this.d.em(), repo.id, number, false);
    // Everything the caller may not do is refused here, before the change starts. Protected refs
    // (DESIGN.md section 11: the merging user must be allowed to push to the target) go here too.
    if (body.delete_source && !rights.push) {
      throw ApiError.forbidden('delete_source deletes a ref as a push would: it needs repo:write');
    }
    const user = await this.d.users.get(actor.id);
    const rules = await this.d.protections.rulesOf(repo.id);
    const pusher = { username: user.username, role: rights.role };
    const refType = repo.driver.constants.refType;
    const refused = mergeRefusal(rules, refType, row.target_ref, pusher);
    if (refused !== undefined) throw ApiError.forbidden(`the merge is refused: ${refused}`);
    const deleteSource =
      body.delete_source &&
      keptSource(repo, row.source_ref) === undefined &&
      sourceKeptBy(rules, refType, row.source_ref, pusher) === undefined;
    if (row.status !== 'open') throw ApiError.mergeRefused('not_open', `the pull request is ${row.status}`);
    const author = { name: user.displayName || user.username, email: user.email };
    const ops = this.d.vcs.ops(repo.vcs);
    let cause: ChangeCause | undefined;
    let outcome: Outcome;
    try {
      outcome = await this.d.changes.change(
        repo,
        actor.id,
        async (because): Promise<Outcome> => {
          // Under the push lock: a merge or a push that finished meanwhile may have merged it.
          const now = await db.pullByNumber(this.d.em().fork(), repo.id, number, false);
          if (now?.status !== 'open') return { kind: 'not_open' };
          const [head, base] = await ops.resolveRefs(repo.path, [row.source_ref, row.target_ref]);
          if (head === undefined) throw new RefNotFound('source', row.source_ref);
          if (base === undefined) throw new RefNotFound('target', row.target_ref);
          await this.checksGate(repo.id, row.target_ref, head);
          const out = await ops.merge(repo.path, {
            source: row.source_ref,
            target: row.target_ref,
            style: body.style,
            ...(body.message === undefined ? {} : { message: body.message }),
            author,
            expectedHead: body.expected_head ?? head,
            ...(body.expected_target_head === undefined
              ? {}
              : { expectedTargetHead: body.expected_target_head }),
          });
          if (out.kind !== 'merged') return out;
          cause = { kind: 'pull_merge', pullId: row.id, actorId: actor.id, head, base };
          because(cause);
          if (deleteSource) await ops.deleteRef(repo.path, row.source_ref, head);
          return out;
        },
        { signal: new AbortController().signal, deadline: Date.now() + LOCK_WAIT_MS },
      );
    } catch (e) {
      if (e instanceof RefNotFound) throw ApiError.notFound(`${e.role} ref "${e.ref}"`);
      if (e instanceof PushLockTimeout) {
        throw new ApiError(503, 'service_unavailable', 'the repository is busy; try again');
      }
      throw e;
    }
    switch (outcome.kind) {
      case 'merged':
        return this.merged(repo, actor, number, outcome.mergeCommit, cause);
      case 'not_open':
        throw ApiError.mergeRefused('not_open', 'the pull request is no longer open');
      case 'conflict':
        throw ApiError.mergeRefused(
          'merge_conflict',
          `merging "${row.source_ref}" into "${row.target_ref}" conflicts in ${outcome.conflictedFiles.length} file(s)`,
          outcome.conflictedFiles,
        );
      case 'head_moved':
        throw ApiError.mergeRefused(
          'head_moved',
          `the source head is ${outcome.head}, not the expected head`,
        );
      case 'target_moved':
        throw ApiError.mergeRefused(
          'target_moved',
          `the target head is ${outcome.head}, not the expected head`,
        );
      case 'not_fast_forward':
        throw ApiError.mergeRefused(
          'not_fast_forward',
          'the target has diverged: a fast-forward is impossible',
        );
      case 'nothing_to_merge':
        throw ApiError.conflict('nothing to merge: the target already contains the change');
    }
  }

  /**
   * Required checks (protection rules of the target: a pipeline, status contexts) gate the merge
   * of this head: 409 `checks_pending` or `checks_failed` until every one succeeded on it.
   */
  private async checksGate(repoId: number, targetRef: string, head: string): Promise<void> {
    const block = await this.d.checks?.mergeBlock(this.d.em().fork(), repoId, { targetRef, head });
    if (block !== undefined) throw block;
  }

  /**
   * The merged pull request. `PullSync` marked it in the change's transaction; should that have
   * failed (it runs in a savepoint), or skipped it because it was closed meanwhile (a close that
   * committed after the check under the push lock), it is marked here, with its event: the merge
   * landed, so the record never says `closed`.
   */
  private async merged(
    repo: RepoHandle,
    actor: Actor,
    number: number,
    mergeCommit: string,
    m: ChangeCause | undefined,
  ): Promise<PullJson> {
    return this.d.em().transactional(async (tx) => {
      let row = await this.reads.find(tx, repo.id, number, true);
      if (row.status !== 'merged') {
        const check = mergedCheck(
          this.d.mergeability,
          repo,
          row,
          m?.head ?? row.head_commit,
          m?.base ?? row.base_commit,
        );
        row = await this.sync.markMerged(tx, repo, row, check, actor.id, mergeCommit);
      }
      const [pull] = await this.reads.json(tx, repo, [row], false);
      return pull!;
    });
  }
}
