import { ApiError } from '../http/errors.ts';
import type { Actor, RepoTarget } from '../http/auth.ts';
import { PushLockTimeout } from '../repos/changes.ts';
import { RefNotFound, type MergeOutcome } from '../vcs/ops.ts';
import type { PullReads } from './reads.ts';
import * as db from './repository.ts';
import type { MergePullBody, PullJson } from './schemas.ts';
import { emitPull, type Merging, type PullsDeps } from './service.ts';
import { mergedCheck } from './sync.ts';
import { refOf } from './writes.ts';

/** How long a merge waits for the repository's push lock. */
const LOCK_WAIT_MS = 60_000;

type Outcome = MergeOutcome | { kind: 'not_open' };

/**
 * Merging a pull request. The merge runs as the mutation of `RepoChanges.change`, so the target's
 * `push` event, its CI pipelines and the readers' invalidation happen exactly as for a client
 * push; the pull request is marked `merged` (with `pull_request.merged`) in that same transaction
 * by `PullSync`, which this class tells which pull request the target move belongs to.
 * `delete_source` deletes (Fossil: closes) the source ref in the same change.
 */
export class PullMerges {
  private readonly d: PullsDeps;
  private readonly reads: PullReads;
  private readonly merging: Map<number, Merging>;

  constructor(deps: PullsDeps, reads: PullReads, merging: Map<number, Merging>) {
    this.d = deps;
    this.reads = reads;
    this.merging = merging;
  }

  async merge(t: RepoTarget, actor: Actor, number: number, body: MergePullBody): Promise<PullJson> {
    const repo = await this.reads.repo(t.repo.id);
    const row = await this.reads.find(this.d.em(), repo.id, number, false);
    if (row.status !== 'open') throw ApiError.mergeRefused('not_open', `the pull request is ${row.status}`);
    const user = await this.d.users.get(actor.id);
    const author = { name: user.displayName || user.username, email: user.email };
    const ops = this.d.ops.get(repo.vcs);
    const record = this.d.repos.changed(await this.d.repos.get(repo.id), t.org.name);
    let mine: Merging | undefined;
    let outcome: Outcome;
    try {
      outcome = await this.d.changes.change(
        record,
        actor.id,
        async (): Promise<Outcome> => {
          // Under the push lock: a merge or a push that finished meanwhile may have merged it.
          const now = await db.pullByNumber(this.d.em().fork(), repo.id, number, false);
          if (now?.status !== 'open') return { kind: 'not_open' };
          const [head, base] = await ops.resolveRefs(repo.path, [row.source_ref, row.target_ref]);
          if (head === undefined) throw new RefNotFound('source', row.source_ref);
          if (base === undefined) throw new RefNotFound('target', row.target_ref);
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
          mine = { pullId: row.id, actorId: actor.id, head, base };
          this.merging.set(repo.id, mine);
          if (body.delete_source) await ops.deleteRef(repo.path, row.source_ref, head);
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
    } finally {
      if (mine !== undefined && this.merging.get(repo.id) === mine) this.merging.delete(repo.id);
    }
    switch (outcome.kind) {
      case 'merged':
        return this.merged(t, actor, number, outcome.mergeCommit, mine);
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
   * The merged pull request. `PullSync` marked it in the change's transaction; should that have
   * failed (it runs in a savepoint), or skipped it because it was closed meanwhile (a close that
   * committed after the check under the push lock), it is marked here, with its event: the merge
   * landed, so the record never says `closed`.
   */
  private async merged(
    t: RepoTarget,
    actor: Actor,
    number: number,
    mergeCommit: string,
    m: Merging | undefined,
  ): Promise<PullJson> {
    const repo = await this.reads.repo(t.repo.id);
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
        row = (await db.updatePull(tx, row.id, {
          status: 'merged',
          check,
          merged: { by: actor.id, commit: mergeCommit },
        }))!;
        const [pull] = await this.reads.json(tx, repo, [row], false);
        await emitPull(tx, this.d.users, refOf(t), actor.id, 'pull_request.merged', {
          action: 'merged',
          pull_request: pull!,
        });
      }
      const [pull] = await this.reads.json(tx, repo, [row], false);
      return pull!;
    });
  }
}
