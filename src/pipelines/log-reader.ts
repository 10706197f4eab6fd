import type { Readable } from 'node:stream';
import type { Db } from '../db/query.ts';
import type { BlobStore } from '../storage/index.ts';
import * as db from './repository.ts';

/**
 * The bytes `start` (inclusive) to `end` (exclusive) of a step's log, from its chunk rows, read
 * lazily. Compaction (log-compaction.ts) may replace the rows meanwhile by one row for a new
 * object holding the same bytes, and delete the old objects after a grace: when an object fails
 * (missing, or its stream breaks) and the row now covering the position names another object,
 * the read goes on from that row at the same byte, so a reader that started before a compaction
 * still gets every byte once. Any other failure is thrown.
 */
export async function* readLog(
  em: () => Db,
  blobs: BlobStore,
  stepId: number,
  start: number,
  end: number,
): AsyncGenerator<Buffer> {
  let at = start;
  while (at < end) {
    const chunks = await db.logChunksFrom(em(), stepId, at, end);
    let moved = false;
    for (const c of chunks) {
      const offset = Number(c.offset);
      if (offset > at) return; // no row holds byte `at` (the log was cut; never by compaction)
      const from = at - offset;
      const to = Math.min(end, offset + c.size) - offset; // exclusive
      if (to <= from) continue;
      let stream: Readable | undefined;
      try {
        stream = await blobs.get(
          c.blob_key,
          from === 0 && to === c.size ? undefined : { start: from, end: to - 1 },
        );
        for await (const piece of stream as AsyncIterable<Buffer>) {
          at += piece.length;
          yield piece;
        }
      } catch (e) {
        if (!(await replaced(em(), stepId, at, c.blob_key))) throw e;
        moved = true;
        break;
      } finally {
        stream?.destroy();
      }
    }
    if (!moved) return;
  }
}

/** Whether the row holding byte `at` of the step names another object than `key` now. */
async function replaced(em: Db, stepId: number, at: number, key: string): Promise<boolean> {
  const [row] = await db.logChunksFrom(em, stepId, at, at + 1);
  return row !== undefined && row.blob_key !== key;
}

/**
 * Starts `it` before handing it on: its first piece is read now, so a failure to open the log (a
 * blob store that cannot be read) is thrown here, before a response is committed.
 */
export async function primed(it: AsyncGenerator<Buffer>): Promise<AsyncGenerator<Buffer>> {
  const head = await it.next();
  return (async function* () {
    if (head.done === true) return;
    yield head.value;
    yield* it;
  })();
}
