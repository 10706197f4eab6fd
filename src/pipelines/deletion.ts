import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { keepNumbersUsed } from '../db/numbers.ts';
import type { BlobStore } from '../storage/index.ts';
import * as db from './deletion-repository.ts';
import { logPrefix } from './model.ts';
import type { DeletableRow } from './deletion-repository.ts';

/** The most pipelines one bulk deletion names. */
export const MAX_DELETE = 100;

/**
 * Pipeline deletion (the web interface's; the API has none): a pipeline with its steps, its log
 * records and its log objects in the blob store, and nothing else. A pending or running pipeline
 * must be cancelled first (an agent still stopping a cancelled one finds its step gone and stops;
 * a log chunk it stores concurrently commits before the deletion, whose object removal follows
 * the commit). "Failed" means `failure` and `error`. A deletion names its
 * pipelines at once: one that cannot go refuses the whole request, nothing is deleted. Numbers
 * are never handed out again (`keepNumbersUsed`). Who may delete (org members with CI write
 * rights) is the caller's check, as for cancel.
 */
export class PipelineDeletion {
  private readonly d: { em: () => EntityManager; blobs: BlobStore; log: Logger };

  constructor(deps: { em: () => EntityManager; blobs: BlobStore; log: Logger }) {
    this.d = deps;
  }

  /** How many pipelines of the repository failed, and the newest pipeline number (for `deleteFailed`). */
  failedSummary(repoId: number): Promise<{ failed: number; newest: number }> {
    return db.failedSummary(this.d.em(), repoId);
  }

  /** Deletes the pipelines numbered `numbers`; 404 naming those that do not exist. Answers the numbers deleted. */
  async delete(repoId: number, numbers: readonly number[]): Promise<number[]> {
    const wanted = [...new Set(numbers)];
    if (wanted.length === 0) throw ApiError.validation('no pipeline selected');
    if (wanted.length > MAX_DELETE) throw ApiError.validation(`at most ${MAX_DELETE} pipelines at once`);
    return this.run(async (tx) => {
      const rows = await db.lockNumbers(tx, repoId, wanted);
      const missing = wanted.filter((n) => !rows.some((r) => r.number === n));
      if (missing.length > 0) throw ApiError.notFound(`pipeline ${missing.map((n) => `#${n}`).join(', ')}`);
      return rows;
    });
  }

  /**
   * Deletes every failed pipeline numbered up to `upTo` (the newest number when the count was
   * shown, so a pipeline failing after the confirmation is not taken with them). Answers the
   * numbers deleted.
   */
  deleteFailed(repoId: number, upTo: number): Promise<number[]> {
    return this.run((tx) => db.lockFailed(tx, repoId, upTo));
  }

  private async run(pick: (tx: EntityManager) => Promise<DeletableRow[]>): Promise<number[]> {
    const rows = await this.deleteWhere(pick);
    return rows.map((r) => r.number);
  }

  /**
   * The one deletion path (the web's deletions and the retention policy, retention.ts): in one
   * transaction, the pipelines `pick` chose and locked go with their steps, log chunk records
   * and clone tokens (by cascade), the numbers used stay used in each repository; then their log
   * objects. Answers the rows deleted. A pending or running pipeline is never deleted.
   */
  async deleteWhere(pick: (tx: EntityManager) => Promise<DeletableRow[]>): Promise<DeletableRow[]> {
    const rows = await this.d
      .em()
      .fork()
      .transactional(async (tx) => {
        const picked = await pick(tx);
        refuseActive(picked);
        if (picked.length === 0) return picked;
        for (const repoId of new Set(picked.map((r) => r.repo_id))) {
          await keepNumbersUsed(tx, 'pipelines', repoId, await db.newestNumber(tx, repoId));
        }
        await db.deleteIds(
          tx,
          picked.map((r) => r.id),
        );
        return picked;
      });
    // The log objects go once the records are gone: a store that fails here leaves objects no
    // record points to (logged), never a pipeline without its log.
    for (const r of rows) {
      await this.d.blobs.deletePrefix(logPrefix(r.id)).catch((e: unknown) => {
        this.d.log.warn({ err: e, pipeline: r.id }, 'the log objects of a deleted pipeline were not removed');
      });
    }
    return rows;
  }
}

function refuseActive(rows: readonly DeletableRow[]): void {
  const active = rows.filter((r) => r.status === 'pending' || r.status === 'running');
  if (active.length > 0) {
    const list = active.map((r) => `#${r.number} (${r.status})`).join(', ');
    throw ApiError.conflict(
      `cancel ${active.length === 1 ? 'the pipeline' : 'these pipelines'} first: ${list}`,
    );
  }
}
