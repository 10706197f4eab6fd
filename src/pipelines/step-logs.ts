import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { BlobStore } from '../storage/index.ts';
import { FINAL, STEP_FINAL } from './model.ts';
import { readLog } from './log-reader.ts';
import type { QueueWaker } from './queue-waker.ts';
import * as db from './repository.ts';
import type { StepRow } from './repository.ts';

/** The most bytes one live event carries. */
const EVENT_MAX = 256 * 1024;
/** How long a follower waits for a notification before it looks again by itself. */
const RECHECK_MS = 15_000;

/** A step as its log readers see it. */
export type StepLogState = {
  pipelineId: number;
  stepId: number;
  number: number;
  name: string;
  status: string;
  exitCode: number | null;
  size: number;
  truncated: boolean;
  /** No more bytes will come: the step (or its pipeline) is final. */
  done: boolean;
};

/** What a live reader gets: bytes (text up to `end`), or the end of the log. */
export type LiveEvent =
  | { kind: 'log'; end: number; text: string }
  | { kind: 'done'; status: string; exitCode: number | null; size: number };

/**
 * Step logs for the web interface's viewer: ranged reads of the whole log (not held to the API
 * read's 16 MiB cap) and a live follower woken by the pipeline's change notifications (no
 * polling of the database; a fallback look every 15 s covers a lost listener). Offsets are byte
 * offsets of the stored log; live text is cut at UTF-8 character boundaries, so an offset never
 * falls inside a character (except in bytes that are not UTF-8 at all).
 */
export class StepLogs {
  private readonly d: { em: () => EntityManager; blobs: BlobStore; waker: QueueWaker };

  constructor(deps: { em: () => EntityManager; blobs: BlobStore; waker: QueueWaker }) {
    this.d = deps;
  }

  /** The step `stepRef` (a number or an exact name) of pipeline `number` (404 when there is none); one not started yet has an empty log. */
  async state(repoId: number, number: number, stepRef: string): Promise<StepLogState> {
    const p = await db.byNumber(this.d.em(), repoId, number);
    if (p === undefined) throw ApiError.notFound('pipeline');
    const steps = await db.steps(this.d.em(), p.id);
    const step =
      (/^\d+$/.test(stepRef) ? steps.find((s) => s.number === Number(stepRef)) : undefined) ??
      steps.find((s) => s.name === stepRef);
    if (step === undefined) throw ApiError.notFound('step');
    return stateOf(step, FINAL.includes(p.status));
  }

  /** The bytes `start` (inclusive) to `end` (exclusive) of a step's log (a compaction meanwhile is no gap: see readLog). */
  range(stepId: number, start: number, end: number): AsyncGenerator<Buffer> {
    return readLog(this.d.em, this.d.blobs, stepId, start, end);
  }

  /**
   * Follows a step's log from byte `from`: its bytes as they are stored, then `done` once the
   * step is final and every byte was given. Ends early when `signal` aborts or the server closes.
   */
  async *follow(s: StepLogState, from: number, signal: AbortSignal): AsyncGenerator<LiveEvent> {
    let at = from;
    let state = s;
    while (!signal.aborted && !this.d.waker.isClosed) {
      // registered before the state is read: a change meanwhile is not missed
      const changed = this.d.waker.changed(state.pipelineId, RECHECK_MS, signal);
      state = await this.reread(state);
      while (at < state.size && !signal.aborted) {
        const end = Math.min(state.size, at + EVENT_MAX);
        const bytes = await collect(this.range(state.stepId, at, end));
        const cut = end === state.size && state.done ? bytes.length : utf8Prefix(bytes);
        if (cut === 0) break; // a character still arriving
        yield { kind: 'log', end: at + cut, text: bytes.subarray(0, cut).toString('utf8') };
        at += cut;
      }
      if (state.done && at >= state.size) {
        yield { kind: 'done', status: state.status, exitCode: state.exitCode, size: state.size };
        return;
      }
      await changed;
    }
  }

  private async reread(s: StepLogState): Promise<StepLogState> {
    const step = await db.step(this.d.em(), s.stepId);
    if (step === undefined) throw ApiError.notFound('step');
    const p = await db.byId(this.d.em(), s.pipelineId);
    return stateOf(step, p === undefined || FINAL.includes(p.status));
  }
}

function stateOf(step: StepRow, pipelineFinal: boolean): StepLogState {
  return {
    pipelineId: step.pipeline_id,
    stepId: step.id,
    number: step.number,
    name: step.name,
    status: step.status,
    exitCode: step.exit_code,
    size: Number(step.log_size),
    truncated: step.log_truncated,
    done: STEP_FINAL.includes(step.status) || pipelineFinal,
  };
}

async function collect(it: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const b of it) parts.push(b);
  return Buffer.concat(parts);
}

/**
 * The length of the longest prefix of `b` that does not end inside a UTF-8 character: a lead
 * byte among the last three whose sequence is not complete is left for later.
 */
export function utf8Prefix(b: Buffer): number {
  for (let back = 1; back <= Math.min(3, b.length); back++) {
    const byte = b[b.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? b.length - back : b.length;
  }
  return b.length;
}
