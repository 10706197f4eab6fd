import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { BlobStore } from '../storage/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { Periodic } from './periodic.ts';
import * as db from './log-compaction-repository.ts';
import { logPrefix } from './model.ts';
import type { LogChunkRow } from './repository.ts';

/** Steps claimed per batch, and batches per run at most. */
const BATCH = 50;
const BATCHES = 10;
/** How long a claimed step is left to its claimer before another replica may take it. */
const LEASE_MS = 10 * 60_000;
/** After a failure (a store that cannot be read or written), the step is tried again this much later. */
const RETRY_MS = 10 * 60_000;
/** A compacted object whose rows never committed (the process died) is deleted this much later. */
const ORPHAN_MS = 60 * 60_000;
/** The largest object one compaction writes (a chunk row's size is a 32-bit integer). */
const MAX_OBJECT = 1024 ** 3;
/** Objects whose deletion is due, per sweep query, and deletions in flight at once. */
const SWEEP = 500;
const DELETES_AT_ONCE = 16;

export type CompactionSettings = {
  /** How often the worker looks for ended steps (0: compaction off). */
  intervalMs: number;
  /** How long the replaced chunk objects stay (readers that started before the compaction). */
  graceMs: number;
};

export type LogCompactorDeps = CompactionSettings & {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  metrics: Metrics;
};

/**
 * Step-log compaction: an agent ships a step's log in many small chunks (one object and one row
 * each); once the step has ended (migration 0023's triggers mark it, whichever path ended it) a
 * periodic worker, off the agent's request path, concatenates its chunks into ONE object, swaps
 * the chunk rows for one row (offset 0, the whole size) in one transaction, and only then lets the
 * old objects go, after a grace. Either the old rows or the new one are readable at every moment;
 * a reader that started before reads on from the new row (log-reader.ts). Idempotent: a step
 * marked twice, a replica racing another (the loser deletes its own object), a process dying
 * anywhere (the marker's lease expires; an object no row took is deleted later) all end in one
 * object. Chunks stored after the compaction (a cancelled step's tail) mark the step again.
 */
export class LogCompactor {
  private readonly d: LogCompactorDeps;
  private readonly periodic: Periodic;
  private readonly compactions;
  private readonly deletions;

  constructor(deps: LogCompactorDeps) {
    this.d = deps;
    this.periodic = new Periodic({
      run: () => this.runOnce(),
      log: deps.log,
      failed: 'step log compaction failed',
    });
    this.compactions = deps.metrics.counter(
      'triad_ci_log_compactions_total',
      'Step logs compacted into one object (`compacted`), or whose compaction failed and waits for a retry (`failed`)',
      ['result'],
    );
    this.deletions = deps.metrics.counter(
      'triad_ci_log_objects_deleted_total',
      'Log chunk objects deleted after their compaction',
      [],
    );
  }

  start(): void {
    if (this.d.intervalMs <= 0) return;
    this.periodic.start(this.d.intervalMs);
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** Compacts the steps due (a bounded number) and deletes the objects whose grace is over. */
  async runOnce(): Promise<{ compacted: number; deleted: number }> {
    let compacted = 0;
    for (let b = 0; b < BATCHES; b++) {
      const steps = await db.claimDue(this.d.em().fork(), BATCH, LEASE_MS);
      for (const step of steps) {
        try {
          if (await this.compactStep(step)) compacted += 1;
        } catch (err) {
          this.compactions.inc({ result: 'failed' });
          this.d.log.warn({ err, step }, 'a step log was not compacted; it is tried again later');
          await db.postpone(this.d.em().fork(), step, RETRY_MS);
        }
      }
      if (steps.length < BATCH) break;
    }
    const deleted = await this.sweep();
    if (compacted > 0 || deleted > 0) {
      this.d.log.info({ steps: compacted, objects_deleted: deleted }, 'step logs compacted');
    }
    return { compacted, deleted };
  }

  /** Compacts one step's chunks; true when some were replaced. */
  async compactStep(stepId: number): Promise<boolean> {
    const found = await db.chunksOf(this.d.em().fork(), stepId);
    if (found === undefined) return false; // deleted meanwhile (its marker went with it)
    let done = false;
    const groups = segments(found.chunks);
    for (const g of groups) {
      if (g.length > 1 && (await this.compactGroup(stepId, found.pipelineId, g))) done = true;
    }
    await this.d
      .em()
      .fork()
      .transactional(async (tx) => {
        if (!(await db.lockStep(tx, stepId))) return;
        // chunks stored since the read (their marker merged into this one): compact again
        await db.finish(tx, stepId, (await db.chunkCount(tx, stepId)) > groups.length);
      });
    if (done) this.compactions.inc({ result: 'compacted' });
    return done;
  }

  private async compactGroup(stepId: number, pipelineId: number, group: LogChunkRow[]): Promise<boolean> {
    const start = Number(group[0]!.offset);
    const last = group[group.length - 1]!;
    const end = Number(last.offset) + last.size;
    const pad = (n: number) => String(n).padStart(14, '0');
    const key = `${logPrefix(pipelineId)}${stepId}/compact-${pad(start)}-${pad(end)}-${randomBytes(4).toString('hex')}`;
    const em = this.d.em().fork();
    // recorded first: when no row takes the object (a crash before the commit), it goes later
    const orphan = await db.addGarbage(em, stepId, [key], ORPHAN_MS);
    const { size } = await this.d.blobs.put(key, Readable.from(this.concat(group)), {
      contentType: 'text/plain; charset=utf-8',
    });
    if (size !== end - start) {
      await this.d.blobs.delete(key);
      throw new Error(`the chunks of step ${stepId} hold ${size} bytes, their rows say ${end - start}`);
    }
    const swapped = await em.fork().transactional(async (tx) => {
      if (!(await db.lockStep(tx, stepId))) return false;
      const now = await db.chunksBetween(tx, stepId, start, end);
      const same =
        now.length === group.length &&
        now.every((c, i) => c.blob_key === group[i]!.blob_key && c.size === group[i]!.size);
      if (!same) return false; // another replica compacted them first
      await db.replaceChunks(tx, stepId, start, end, key);
      await db.addGarbage(
        tx,
        stepId,
        group.map((c) => c.blob_key),
        this.d.graceMs,
      );
      await db.dropGarbage(tx, orphan);
      return true;
    });
    if (!swapped) {
      await this.d.blobs.delete(key);
      await db.dropGarbage(em.fork(), orphan);
    }
    return swapped;
  }

  private async *concat(group: readonly LogChunkRow[]): AsyncGenerator<Buffer> {
    for (const c of group) {
      const stream = await this.d.blobs.get(c.blob_key);
      try {
        for await (const piece of stream as AsyncIterable<Buffer>) yield piece;
      } finally {
        stream.destroy();
      }
    }
  }

  /** Deletes the objects whose grace is over (those a row points to again stay); answers how many. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const due = await db.dueGarbage(this.d.em().fork(), SWEEP);
      const unused = due.filter((g) => !g.referenced);
      for (let i = 0; i < unused.length; i += DELETES_AT_ONCE) {
        await Promise.all(unused.slice(i, i + DELETES_AT_ONCE).map((g) => this.d.blobs.delete(g.blob_key)));
      }
      await db.dropGarbage(
        this.d.em().fork(),
        due.map((g) => g.id),
      );
      const n = unused.length;
      deleted += n;
      if (n > 0) this.deletions.inc(n);
      if (due.length < SWEEP) return deleted;
    }
  }
}

/** Runs of consecutive chunks, each at most MAX_OBJECT bytes in all (one object each). */
function segments(chunks: readonly LogChunkRow[]): LogChunkRow[][] {
  const out: LogChunkRow[][] = [];
  let cur: LogChunkRow[] = [];
  let size = 0;
  let next = -1;
  for (const c of chunks) {
    const offset = Number(c.offset);
    if (cur.length > 0 && (offset !== next || size + c.size > MAX_OBJECT)) {
      out.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(c);
    size += c.size;
    next = offset + c.size;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
