import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import * as db from './pins-repository.ts';
import type { IssueReads } from './reads.ts';
import type { IssueJson } from './schemas.ts';

/**
 * Pinned issues (web interface only; the API's issue records do not show them). Members of the
 * repository's organization pin and unpin (403 for anyone else); a repository has at most
 * `max` pins (409 `limit_exceeded` naming the cap beyond). Pins keep the order they were made
 * in. A closed issue stays pinned, and counts, until someone unpins it (as GitHub does). Pinning
 * a pinned issue or unpinning one that is not pinned changes nothing.
 */
export class IssuePins {
  private readonly em: () => EntityManager;
  private readonly reads: IssueReads;
  /** Most pinned issues per repository (`TRIAD_MAX_PINNED_ISSUES`). */
  readonly max: number;

  constructor(deps: { em: () => EntityManager; reads: IssueReads; maxPinned: number }) {
    this.em = deps.em;
    this.reads = deps.reads;
    this.max = deps.maxPinned;
  }

  /** The pinned issues of the repository as the list shows them, in pin order. */
  async list(t: RepoTarget): Promise<IssueJson[]> {
    const numbers = await db.pinnedNumbers(this.em(), t.repo.id);
    return numbers.length === 0 ? [] : this.reads.byNumbers(t, numbers);
  }

  async isPinned(t: RepoTarget, number: number): Promise<boolean> {
    const row = await this.reads.find(this.em(), t.repo.id, number, false);
    return db.isPinned(this.em(), row.id);
  }

  /** Pins the issue `number` (`actor` with its role in the repository's organization). */
  async pin(t: RepoTarget, actor: Actor, number: number): Promise<void> {
    IssuePins.mayPin(actor);
    await this.em().transactional(async (tx) => {
      await db.lockPins(tx, t.repo.id);
      const row = await this.reads.find(tx, t.repo.id, number, false);
      if (await db.isPinned(tx, row.id)) return;
      if ((await db.pinCount(tx, t.repo.id)) >= this.max) {
        throw ApiError.limitExceeded(
          `a repository may have at most ${this.max} pinned ${this.max === 1 ? 'issue' : 'issues'}; unpin one first`,
        );
      }
      await db.insertPin(tx, t.repo.id, row.id, actor.id);
    });
  }

  async unpin(t: RepoTarget, actor: Actor, number: number): Promise<void> {
    IssuePins.mayPin(actor);
    await this.em().transactional(async (tx) => {
      await db.lockPins(tx, t.repo.id);
      const row = await this.reads.find(tx, t.repo.id, number, false);
      await db.deletePin(tx, row.id);
    });
  }

  private static mayPin(actor: Actor): void {
    if (actor.role === undefined) {
      throw ApiError.forbidden('only members of the organization may pin or unpin issues');
    }
  }
}
