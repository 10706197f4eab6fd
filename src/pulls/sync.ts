import type { Db } from '../db/query.ts';
import type { RepoHandle } from '../domain/repo.ts';
import type { Trigger } from '../pipelines/model.ts';
import type { ChangeCause, ChangeContext } from '../repos/changes.ts';
import type { HeadMove } from '../vcs/driver.ts';
import type { Mergeability } from './mergeability.ts';
import type { PullReads } from './reads.ts';
import * as db from './repository.ts';
import type { PullRow, StoredCheck } from './repository.ts';
import { emitPull, type PullsDeps } from './service.ts';

/**
 * What moved refs mean for open pull requests: the `pulls` listener of `RepoChanges`, inside the
 * change's transaction (any change: a client push, a merge, one found at start-up). A ref moved
 * when the head it names moved (`ChangeContext.heads`: also a Mercurial named branch, or `@`
 * standing for the default one, that a push moved along with some bookmark):
 * - the pull request whose merge caused the change (its target moved) becomes `merged`;
 * - any other whose target moved so that it now contains the source head, which the target's
 *   previous head did not, becomes `merged` too (a manual merge: merged_by is the pusher,
 *   merge_commit the target head); one whose source was already contained (`behind`: created
 *   with nothing to merge, or its source moved back onto the target's history) stays open;
 * - one whose source moved otherwise is `synchronized`: new `head_commit`, an event, and a
 *   `pull_request` CI trigger for the new head, handed to the `ci` phase to join the change's own
 *   triggers (one pipeline for a commit reached by both).
 */
export class PullSync {
  readonly phase = 'pulls';
  private readonly d: PullsDeps;
  private readonly reads: PullReads;

  constructor(deps: PullsDeps, reads: PullReads) {
    this.d = deps;
    this.reads = reads;
  }

  async onMoves(ctx: ChangeContext): Promise<void> {
    ctx.triggers.push(...(await this.refsMoved(ctx.tx, ctx.repo, ctx.heads, ctx.senderId, ctx.cause)));
  }

  private async refsMoved(
    tx: Db,
    repo: RepoHandle,
    moved: ReadonlyMap<string, HeadMove>,
    senderId: number | null,
    cause: ChangeCause | undefined,
  ): Promise<Trigger[]> {
    const mergeCause = cause?.kind === 'pull_merge' ? cause : undefined;
    const rows = await db.openTouching(tx, repo.id, [...moved.keys()]);
    const ops = this.d.vcs.ops(repo.vcs);
    const heads = await this.unmovedHeads(repo, rows, moved);
    const contains = memoAncestry((a, d) => ops.isAncestor(repo.path, a, d));
    const triggers: Trigger[] = [];
    for (const row of rows) {
      const newSource = moved.get(row.source_ref)?.head;
      const targetMove = moved.get(row.target_ref);
      if (mergeCause?.pullId === row.id && targetMove !== undefined) {
        const check = mergedCheck(this.d.mergeability, repo, row, mergeCause.head, mergeCause.base);
        await this.markMerged(tx, repo, row, check, mergeCause.actorId, targetMove.head);
        continue;
      }
      const sourceHead = newSource ?? heads.get(row.source_ref) ?? row.head_commit;
      const targetHead = targetMove?.head ?? heads.get(row.target_ref);
      // A manual merge: this push moved the target so that it contains the source head, which the
      // target's previous head did not (a source already contained, `behind`, stays open).
      if (
        targetMove !== undefined &&
        (await contains(sourceHead, targetMove.head)) &&
        (targetMove.oldHead === '' || !(await contains(sourceHead, targetMove.oldHead)))
      ) {
        // base: the target before this push, as after a merge through Triad (its range, its
        // commits and files, stay readable)
        const check: StoredCheck = {
          head_commit: sourceHead,
          base_commit: targetMove.oldHead === '' ? targetMove.head : targetMove.oldHead,
          mergeable_state: 'behind',
          conflicted_files: [],
          commits_ahead: 0,
          commits_behind: 0,
        };
        await this.markMerged(tx, repo, row, check, senderId, targetMove.head);
        continue;
      }
      if (newSource === undefined || newSource === row.head_commit) continue;
      const check =
        targetHead === undefined
          ? { ...row, head_commit: newSource, mergeable_state: 'checking' as const }
          : this.d.mergeability.peek(repo, row.source_ref, row.target_ref, newSource, targetHead);
      const updated = (await db.updatePull(tx, row.id, { check }))!;
      const [pull] = await this.reads.json(tx, repo, [updated], false);
      await emitPull(tx, this.d.users, repositoryRef(repo), senderId, 'pull_request.synchronized', {
        action: 'synchronized',
        pull_request: pull!,
      });
      triggers.push({ commit: newSource, event: 'pull_request', branch: row.source_ref, tag: '', senderId });
    }
    return triggers;
  }

  /** The heads of the refs these rows name that the push did not move: one VCS call. */
  private async unmovedHeads(
    repo: RepoHandle,
    rows: readonly PullRow[],
    moved: ReadonlyMap<string, HeadMove>,
  ): Promise<Map<string, string | undefined>> {
    const names = [...new Set(rows.flatMap((r) => [r.source_ref, r.target_ref]))].filter(
      (n) => !moved.has(n),
    );
    if (names.length === 0) return new Map();
    const ids = await this.d.vcs.ops(repo.vcs).resolveRefs(repo.path, names);
    return new Map(names.map((n, i) => [n, ids[i]]));
  }

  /**
   * The one place a pull request becomes `merged`: the record (merged by `by`, at `commit`, with the
   * mergeability it had) and its `pull_request.merged` event, in the caller's transaction.
   */
  async markMerged(
    tx: Db,
    repo: RepoHandle,
    row: PullRow,
    check: StoredCheck,
    by: number | null,
    commit: string,
  ): Promise<PullRow> {
    const updated = (await db.updatePull(tx, row.id, { status: 'merged', check, merged: { by, commit } }))!;
    const [pull] = await this.reads.json(tx, repo, [updated], false);
    await emitPull(tx, this.d.users, repositoryRef(repo), by, 'pull_request.merged', {
      action: 'merged',
      pull_request: pull!,
    });
    return updated;
  }
}

/**
 * `isAncestor` asked once per pair of commits within one push (pull requests sharing a source and
 * a target cost one VCS call, not one each).
 */
function memoAncestry(
  isAncestor: (ancestor: string, descendant: string) => Promise<boolean>,
): (ancestor: string, descendant: string) => Promise<boolean> {
  const seen = new Map<string, Promise<boolean>>();
  return (a, d) => {
    const key = `${a} ${d}`;
    let p = seen.get(key);
    if (p === undefined) {
      p = isAncestor(a, d);
      seen.set(key, p);
    }
    return p;
  };
}

/** The repository as an event names it. */
function repositoryRef(repo: RepoHandle): { id: number; name: string; org: string } {
  return { id: repo.id, name: repo.name, org: repo.org };
}

/** A merged pull request keeps the mergeability it had when merged (source and target heads then). */
export function mergedCheck(
  m: Mergeability,
  repo: RepoHandle,
  row: PullRow,
  head: string,
  base: string,
): StoredCheck {
  return m.cached(repo, head, base) ?? { ...pick(row), head_commit: head, base_commit: base };
}

function pick(r: PullRow): StoredCheck {
  return {
    head_commit: r.head_commit,
    base_commit: r.base_commit,
    mergeable_state: r.mergeable_state === 'checking' ? 'clean' : r.mergeable_state,
    conflicted_files: r.conflicted_files,
    commits_ahead: r.commits_ahead,
    commits_behind: r.commits_behind,
  };
}
