import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Metrics } from '../telemetry/metrics.ts';
import { Periodic } from './periodic.ts';
import { MAX_DELETE, type PipelineDeletion } from './deletion.ts';
import type { DeletableRow } from './deletion-repository.ts';
import * as db from './retention-repository.ts';
import type { RetentionPolicy } from './retention-repository.ts';

/** Batches (of MAX_DELETE pipelines, one transaction each) one run deletes at most. */
const BATCHES = 50;

export type RetentionSettings = RetentionPolicy & {
  /** How often the policy runs (when `days` or `keep` is set). */
  intervalMs: number;
};

export type PipelineRetentionDeps = {
  em: () => EntityManager;
  log: Logger;
  metrics: Metrics;
  deletion: PipelineDeletion;
  settings: RetentionSettings;
};

/**
 * The retention policy of pipelines and their logs (`TRIAD_RETENTION_DAYS`, `TRIAD_RETENTION_KEEP`;
 * off unless one is set): periodically, finished pipelines older than the days, or beyond the
 * newest `keep` finished ones of their repository, are deleted, except the newest finished
 * pipeline of each branch or tag; pending and running ones are never touched. One replica at a
 * time: each batch's transaction first takes a transaction-scoped advisory lock (no session lock,
 * so it works behind a transaction-mode pooler) and a replica that does not get it skips its run.
 * Deletion goes through the web's path (`PipelineDeletion.deleteWhere`): rows, clone tokens and log
 * objects alike.
 */
export class PipelineRetention {
  private readonly d: PipelineRetentionDeps;
  private readonly periodic: Periodic;
  private readonly deleted;
  private readonly runs;

  constructor(deps: PipelineRetentionDeps) {
    this.d = deps;
    this.periodic = new Periodic({
      run: () => this.runOnce(),
      log: deps.log,
      failed: 'the pipeline retention run failed',
    });
    this.deleted = deps.metrics.counter(
      'triad_ci_retention_deleted_total',
      'Pipelines deleted by the retention policy (TRIAD_RETENTION_DAYS, TRIAD_RETENTION_KEEP)',
      [],
    );
    this.runs = deps.metrics.counter(
      'triad_ci_retention_runs_total',
      'Runs of the retention policy: `done`, or `busy` when another replica held the lock',
      ['result'],
    );
  }

  /** Whether a policy is set. */
  get enabled(): boolean {
    return this.d.settings.days !== undefined || this.d.settings.keep !== undefined;
  }

  start(): void {
    if (!this.enabled) return;
    this.periodic.start(this.d.settings.intervalMs);
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /**
   * One run: batches until nothing more is due (or the batch bound). Answers the pipelines
   * deleted, and `busy` when another replica held the lock (then this one deleted nothing more).
   */
  async runOnce(): Promise<{ deleted: DeletableRow[]; busy: boolean }> {
    const { days, keep } = this.d.settings;
    const all: DeletableRow[] = [];
    if (!this.enabled) return { deleted: all, busy: false };
    let busy = false;
    for (let b = 0; b < BATCHES && !busy; b++) {
      const rows = await this.d.deletion.deleteWhere(async (tx) => {
        if (!(await db.tryLock(tx))) {
          busy = true;
          return [];
        }
        return db.expired(tx, { days, keep }, MAX_DELETE);
      });
      all.push(...rows);
      if (rows.length > 0) {
        this.deleted.inc(rows.length);
        this.d.log.info(
          {
            deleted: rows.length,
            pipelines: rows.map((r) => ({ repo_id: r.repo_id, number: r.number, status: r.status })),
          },
          'pipelines deleted by the retention policy',
        );
      }
      if (rows.length < MAX_DELETE) break;
    }
    this.runs.inc({ result: busy ? 'busy' : 'done' });
    return { deleted: all, busy };
  }
}
