import type { EntityManager } from '@mikro-orm/postgresql';
import type { RepoHandle } from '../domain/repo.ts';
import type { Vcs } from '../vcs/index.ts';
import type { ChangeListener } from './changes.ts';
import * as db from './revs-repository.ts';

/** Where a repository's commits are numbered: its storage, kind and driver. */
type Numbered = Pick<RepoHandle, 'id' | 'vcs' | 'path' | 'driver'>;

/**
 * The earlier API variant's `rev` of commits: an integer unique and stable within the repository.
 * Mercurial's revision number and Fossil's rid come from the VCS (`RepoReader.revs`). Where the
 * VCS numbers no commits (Git), the number is the commit's position in the repository's sequence
 * of commits as they arrived, kept in PostgreSQL (`commit_revs`, so a repository moved to other
 * storage keeps its numbers): every change appends the commits it brought, parents first,
 * through `listener` (a phase of `RepoChanges`, in the change's transaction). Commits that arrived
 * unrecorded (a repository older than the sequence, a change whose listener failed) are appended,
 * in history order, when a number is first asked for one of them.
 */
export class CommitRevs {
  private readonly em: () => EntityManager;
  private readonly vcs: Pick<Vcs, 'reader'>;

  constructor(deps: { em: () => EntityManager; vcs: Pick<Vcs, 'reader'> }) {
    this.em = deps.em;
    this.vcs = deps.vcs;
  }

  /** The numbers of these commits (full ids of commits the repository has). */
  async of(repo: Numbered, ids: readonly string[]): Promise<Map<string, number>> {
    const wanted = [...new Set(ids)];
    if (wanted.length === 0) return new Map();
    const reader = this.vcs.reader(repo.vcs, repo.path);
    if (reader.revs !== undefined) return reader.revs(wanted);
    const driver = repo.driver;
    if (driver.arrivals === undefined) return new Map();
    const known = await db.recordedRevs(this.em(), repo.id, wanted);
    const missing = wanted.filter((id) => !known.has(id));
    if (missing.length === 0) return known;
    // The whole history in order, then any asked-for commit no ref reaches (a hash of a commit
    // a force-push left behind): those commits exist, the reader read them.
    const history = await driver.arrivals(repo.path, []);
    await this.em().transactional((tx) => db.appendRevs(tx, repo.id, [...history, ...missing]));
    return db.recordedRevs(this.em(), repo.id, wanted);
  }

  /** Appends what each change brought, parents first (kinds with `VcsDriver.arrivals`). */
  readonly listener: ChangeListener = {
    phase: 'revs',
    onMoves: async ({ tx, repo, before }) => {
      const driver = repo.driver;
      if (driver.arrivals === undefined) return;
      const known = [...before.branches.values(), ...before.tags.values()];
      await db.appendRevs(tx, repo.id, await driver.arrivals(repo.path, known));
    },
  };
}
