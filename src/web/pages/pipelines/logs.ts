/**
 * Step logs for signed-in browsers (the API's step-log read is a capped snapshot): the whole log
 * with byte ranges (`/raw`), and the live log as Server-Sent Events (`/live`).
 *
 * Live: `?tail=BYTES` starts that far before the end (moved forward to the next line), `?offset=K`
 * at byte K, and `Last-Event-ID` (an EventSource reconnecting) wins over both. Events: `begin`
 * `{offset, size}`, then `log` events whose `id` is the byte offset just after their text (a JSON
 * string), heartbeat comments every 15 s, and `done` `{status, exit_code, size}` before the
 * server ends the stream. A server that stops ends its streams without `done`; the browser
 * reconnects with the last id and loses or doubles no byte. Each user may hold a bounded number
 * of streams at once (429 beyond).
 */
import { clientLeft } from '../../../http/connections.ts';
import { ApiError } from '../../../http/errors.ts';
import { parseRange } from '../../../http/range.ts';
import { sendStream } from '../../../http/stream-reply.ts';
import type { StepLogState } from '../../../pipelines/step-logs.ts';
import { idParam, web, type UserCtx, type WebReply } from '../../context.ts';
import { loadRepo } from '../../repo-page.ts';
import type { WebRouter } from '../../web.ts';
import { RAW_CSP } from '../code/downloads.ts';
import { READ, type PipelineDeps } from './common.ts';

/** Open live streams a user may hold at once (tabs, steps). */
export const STREAMS_PER_USER = 16;
const HEARTBEAT_MS = 15_000;

const open = new Map<number, number>();

export function stepLogPages(w: WebRouter, d: PipelineDeps): void {
  w.userGet('/:org/:repo/-/pipelines/:number/steps/:step/raw', (ctx) => raw(ctx, d));
  w.userGet('/:org/:repo/-/pipelines/:number/steps/:step/live', (ctx) => live(ctx, d));
}

async function stepOf(ctx: UserCtx, d: PipelineDeps): Promise<StepLogState> {
  const p = await loadRepo(ctx, d.repos, READ);
  return d.pipelines.stepLogs.state(p.target.repo.id, idParam(ctx.params.number), ctx.params.step ?? '');
}

async function raw(ctx: UserCtx, d: PipelineDeps): Promise<WebReply> {
  const s = await stepOf(ctx, d);
  const { req, res } = ctx;
  const range = parseRange(req.headers.range, s.size);
  const headers: Record<string, string> = {
    'Content-Type': 'text/plain; charset=utf-8',
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': RAW_CSP,
  };
  if (ctx.query.download === '1')
    headers['Content-Disposition'] = `attachment; filename="step-${s.number}.log"`;
  if (range === 'unsatisfiable') {
    res.status(416).setHeader('Content-Range', `bytes */${s.size}`);
    res.end();
    return web.handled();
  }
  const { start, end } = range ?? { start: 0, end: s.size - 1 };
  headers['Content-Length'] = String(Math.max(0, end - start + 1));
  if (range !== undefined) headers['Content-Range'] = `bytes ${start}-${end}/${s.size}`;
  await sendStream(req, res, {
    status: range === undefined ? 200 : 206,
    headers,
    body: d.pipelines.stepLogs.range(s.stepId, start, end + 1),
    handOff: undefined,
  });
  return web.handled();
}

/** Where a live stream starts: Last-Event-ID, `offset`, or `tail` bytes before the end. */
async function startOf(ctx: UserCtx, d: PipelineDeps, s: StepLogState): Promise<number> {
  const last = ctx.req.headers['last-event-id'];
  const exact = typeof last === 'string' && last !== '' ? last : ctx.query.offset;
  if (exact !== undefined) {
    if (!/^\d{1,15}$/.test(exact)) throw ApiError.badRequest('offset must be a byte offset');
    return Math.min(Number(exact), s.size);
  }
  const tail = ctx.query.tail;
  if (tail === undefined) return 0;
  if (!/^\d{1,15}$/.test(tail)) throw ApiError.badRequest('tail must be a number of bytes');
  const from = Math.max(0, s.size - Number(tail));
  if (from === 0) return 0;
  // forward to the next line's start, when there is one in the tail
  let at = from;
  for await (const piece of d.pipelines.stepLogs.range(s.stepId, from, s.size)) {
    const nl = piece.indexOf(10);
    if (nl >= 0) return at + nl + 1;
    at += piece.length;
  }
  return from;
}

async function live(ctx: UserCtx, d: PipelineDeps): Promise<WebReply> {
  const s = await stepOf(ctx, d);
  const start = await startOf(ctx, d, s);
  const userId = ctx.user.id;
  const held = open.get(userId) ?? 0;
  if (held >= STREAMS_PER_USER) {
    throw new ApiError(429, 'rate_limited', `at most ${STREAMS_PER_USER} live logs open at once`);
  }
  open.set(userId, held + 1);
  const { res } = ctx;
  // a client that left during the reads above is gone already (its close was not heard)
  const gone = clientLeft(ctx.req, res);
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  // backpressure: wait for the client to read (or to go away)
  const send = (text: string) =>
    res.write(text) || gone.aborted
      ? Promise.resolve()
      : new Promise<void>((r) => {
          const on = () => {
            res.off('drain', on);
            gone.removeEventListener('abort', on);
            r();
          };
          res.on('drain', on);
          gone.addEventListener('abort', on);
        });
  const beat = setInterval(() => res.write(': hb\n\n'), HEARTBEAT_MS);
  try {
    await send(`event: begin\ndata: ${JSON.stringify({ offset: start, size: s.size })}\n\n`);
    for await (const e of d.pipelines.stepLogs.follow(s, start, gone)) {
      if (e.kind === 'log') {
        await send(`id: ${e.end}\nevent: log\ndata: ${JSON.stringify(e.text)}\n\n`);
      } else {
        const done = { status: e.status, exit_code: e.exitCode, size: e.size };
        await send(`event: done\ndata: ${JSON.stringify(done)}\n\n`);
      }
    }
  } catch (e) {
    if (!gone.aborted) d.log.warn({ err: e }, 'a live step log ended on an error');
  } finally {
    clearInterval(beat);
    const n = (open.get(userId) ?? 1) - 1;
    if (n === 0) open.delete(userId);
    else open.set(userId, n);
    res.end();
  }
  return web.handled();
}
