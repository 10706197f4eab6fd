import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { CgiResult } from '../vcs/process/cgi.ts';
import { BodyTooLarge, hasBody, receiveBody, type Spool } from '../vcs/process/spool.ts';
import type { VcsDriver } from '../vcs/driver.ts';
import { GateFull } from '../vcs/process/gate.ts';
import { serveBackend, type BackendRequest, type TransportServers } from '../vcs/transport.ts';
import type { RepoHandle } from '../domain/repo.ts';
import { PushLockTimeout, type RepoChanges } from './changes.ts';

/** The transfer ran past its time limit. */
class TransferTimeout extends Error {}
/** The client closed the connection before the response was complete. */
class ClientGone extends Error {}

export type Push = { changes: RepoChanges; repo: RepoHandle; senderId: number | null };
export type TransferLimits = {
  spool: Spool;
  log: Logger;
  timeoutMs: number;
  maxBodyBytes: number;
  /** The shared concurrency cap and the pooled backends. */
  servers: TransportServers;
  /** Seconds a refused client is told to wait (`Retry-After` of a 503). */
  retryAfterSeconds: number;
};

type Request = Omit<BackendRequest, 'input' | 'output' | 'tmpDir' | 'scriptDir' | 'signal'> & {
  driver: VcsDriver;
};

/**
 * One request at a clone URL, from the body to the last byte of the answer, bounded by the
 * transport timeout and stopped as soon as the client leaves:
 * 1. the body is spooled to a per-request directory (size-capped: 413 beyond), before any lock or
 *    database connection is taken, so a slow or vanishing client holds nothing but a file;
 * 2. it waits for a slot of the transports' shared concurrency cap (503 with `Retry-After` when
 *    the queue is full), so a flood of clones cannot take the whole machine from the API; a push
 *    waits for it only once it holds its repository's push lock;
 * 3. a read runs the backend with its output streamed to the client; a push runs it from the
 *    spool under the repository's push lock (`RepoChanges`) with its output held in a file, sent
 *    once the push is recorded (a push request whose body shows it changes nothing, such as git's
 *    probe, `VcsTransport.inert`, is served as a read). While a push's body arrives, the driver
 *    may prepare its bookkeeping (`RepoChanges.prepare`);
 * 4. the backend's whole process group is killed when the client leaves or time runs out, and the
 *    per-request directory (spooled body, held answer, the backend's TMPDIR) is removed always.
 */
export async function transfer(r: Request, push: Push | undefined, limits: TransferLimits): Promise<void> {
  const { res, req } = r;
  const reqId = String(res.getHeader('x-request-id') ?? '');
  const log = limits.log.child({ reqId });
  const ac = new AbortController();
  const deadline = Date.now() + limits.timeoutMs;
  const timer = setTimeout(() => ac.abort(new TransferTimeout('transfer timed out')), limits.timeoutMs);
  const onClose = () => {
    if (!res.writableFinished) ac.abort(new ClientGone('client closed the connection'));
  };
  res.on('close', onClose);
  if (req.socket.destroyed) onClose(); // it left while the request was being authorised
  const watch = limits.servers.metrics?.watch(r.driver.kind, res);
  push?.changes.prepare(push.repo);
  const ws = await limits.spool.workspace();
  let leave: (() => void) | undefined;
  try {
    let input: BackendRequest['input'];
    if (hasBody(req)) {
      const file = path.join(ws.dir, 'body');
      input = { file, size: await receiveBody(req, file, limits.maxBodyBytes, ac.signal) };
      watch?.received(input.size);
    }
    const tmpDir = path.join(ws.dir, 'tmp');
    await fs.mkdir(tmpDir);
    const scriptDir = await limits.spool.scriptDir();
    const { driver, ...rest } = r;
    const backend: BackendRequest = { ...rest, input, tmpDir, scriptDir, signal: ac.signal };
    const { servers } = limits;
    if (push === undefined || (await driver.transport.inert?.(input)) === true) {
      leave = await servers.limiter.enter(ac.signal);
      answer(res, await serveBackend(driver, backend, servers), ac.signal, log);
      return;
    }
    const output = path.join(ws.dir, 'response');
    watch?.push();
    // A push takes its slot once it holds the repository's push lock: pushes queued behind a slow
    // push to one repository must not hold the slots other repositories' clones and pushes need.
    // (Lock order: push lock, then slot; reads take only the slot.) `GateFull` thrown in there
    // comes back out of `change` after the unchanged refs are recorded.
    const result = await push.changes.change(
      push.repo,
      push.senderId,
      async () => {
        leave = await servers.limiter.enter(ac.signal);
        return serveBackend(driver, { ...backend, output }, servers);
      },
      { signal: ac.signal, deadline },
    );
    leave?.();
    if (result.outcome === 'ok') {
      // The push is recorded: its answer gets a time limit of its own, not what is left of the
      // transfer's (the client should learn that its push went through).
      clearTimeout(timer);
      const sendLimit = AbortSignal.timeout(limits.timeoutMs);
      await pipeline(createReadStream(output), res, { signal: sendLimit }).catch(() => res.destroy());
      logFailure(result, log, res.statusCode);
    } else answer(res, result, ac.signal, log);
  } catch (e) {
    if (e instanceof GateFull) {
      res.setHeader('Retry-After', String(limits.retryAfterSeconds));
      plain(res, 503, 'too many clone and push requests at once; try again later');
    } else if (e instanceof BodyTooLarge) {
      res.setHeader('Connection', 'close');
      plain(res, 413, `request body larger than ${limits.maxBodyBytes} bytes`);
    } else if (e instanceof PushLockTimeout || e instanceof TransferTimeout) {
      timedOut(res, reqId);
    } else if (e instanceof ClientGone || ac.signal.aborted) {
      if (ac.signal.reason instanceof TransferTimeout) timedOut(res, reqId);
      else res.destroy();
    } else throw e;
  } finally {
    leave?.();
    clearTimeout(timer);
    res.off('close', onClose);
    await ws.remove();
  }
}

/** Ends the response after a backend run; failures are logged, never sent (no paths, no tracebacks). */
function answer(res: ServerResponse, result: CgiResult, signal: AbortSignal, log: Logger): void {
  logFailure(result, log, res.statusCode);
  const reqId = String(res.getHeader('x-request-id') ?? '');
  switch (result.outcome) {
    case 'ok':
      res.end();
      return;
    case 'failed':
      if (res.headersSent) res.destroy();
      else plain(res, 502, `repository backend failed (request id ${reqId})`);
      return;
    case 'aborted':
      if (signal.reason instanceof TransferTimeout) timedOut(res, reqId);
      else res.destroy();
  }
}

/**
 * A backend that failed is an error; one that ended abnormally (stopped) a warning; a client error
 * the backend answered itself (a 4xx: a wire command without its arguments, a refused push) is
 * the client's: debug.
 */
function logFailure(result: CgiResult, log: Logger, status: number): void {
  if (result.outcome === 'ok' && status >= 400 && status < 500) {
    log.debug({ status, stderr: result.stderr }, 'repository backend refused the request');
    return;
  }
  if (result.outcome === 'ok' && result.code === 0) return;
  const fields = { outcome: result.outcome, code: result.code, stderr: result.stderr };
  if (result.outcome === 'failed') log.error(fields, 'repository backend failed');
  else log.warn(fields, 'repository backend ended abnormally');
}

function timedOut(res: ServerResponse, reqId: string): void {
  if (res.headersSent) res.destroy();
  else plain(res, 504, `repository transfer timed out (request id ${reqId})`);
}

/** A short plain-text answer, replacing whatever headers a backend had set. */
function plain(res: ServerResponse, status: number, message: string): void {
  if (res.destroyed || res.writableEnded) return;
  const keep = new Set([
    'x-request-id',
    'x-content-type-options',
    'content-security-policy',
    'connection',
    'retry-after',
  ]);
  for (const name of res.getHeaderNames()) if (!keep.has(name)) res.removeHeader(name);
  res.statusCode = status;
  res.statusMessage = reasonPhrase(message);
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.end(`${message}\n`);
}

/**
 * A refusal's message as the status line's reason phrase: Mercurial's client shows only that
 * (`abort: HTTP Error 403: token lacks the repo:write scope`), git shows the plain-text body.
 * Reduced to what a status line may carry (visible ASCII and spaces), at most 200 characters.
 */
export function reasonPhrase(message: string): string {
  return message
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim()
    .slice(0, 200);
}
