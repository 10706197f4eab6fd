import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { processAlive as alive } from '../../db/processes.ts';

/** The request body is larger than the configured cap. */
export class BodyTooLarge extends Error {}

/** A per-request scratch directory: the spooled body, the buffered response, the backend's TMPDIR. */
export type Workspace = { dir: string; remove: () => Promise<void> };

const PREFIX = 'triad-spool-';
const SCRIPTS = 'scripts';

/**
 * Where request bodies and backend temporary files go. Each process works in its own directory
 * `triad-spool-<host>-<pid>-*` under the root, made when the server starts (`open`), which also
 * removes the directories left by dead processes of the same host (a server killed with SIGKILL),
 * and removed when it stops (`close`).
 *
 * The process directory is never empty (it holds `scripts/` from the start): Mercurial removes a
 * temporary directory of its own and then its parents as far up as they are empty (a stream
 * clone does), which took the process directory with it. Should it be gone all the same (a
 * cleaner of /tmp), the next workspace makes it again.
 */
export class Spool {
  private readonly root: string;
  private own: Promise<string> | undefined;

  constructor(root: string) {
    this.root = root;
  }

  /** At start: removes dead processes' directories and makes this process's own. */
  async open(): Promise<void> {
    await this.processDir();
  }

  /**
   * At a clean stop, once no transfer runs any more: removes this process's directory with what
   * is left in it (CGI scripts; the directories of requests cut short by the stop). A later
   * workspace makes it again.
   */
  async close(): Promise<void> {
    const own = this.own;
    this.own = undefined;
    const dir = await own?.catch(() => undefined);
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
  }

  private processDir(): Promise<string> {
    this.own ??= (async () => {
      await fs.mkdir(this.root, { recursive: true });
      const host = os.hostname().replace(/[^A-Za-z0-9]/g, '_'); // no '-': names parse unambiguously
      await removeStale(this.root, host);
      const dir = await fs.mkdtemp(path.join(this.root, `${PREFIX}${host}-${process.pid}-`));
      await fs.mkdir(path.join(dir, SCRIPTS));
      return dir;
    })();
    this.own.catch(() => (this.own = undefined));
    return this.own;
  }

  async workspace(): Promise<Workspace> {
    const made = await this.processDir();
    const dir = await fs.mkdtemp(path.join(made, 'r')).catch(async (e: unknown) => {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      if (this.own !== undefined && (await this.own.catch(() => undefined)) === made) this.own = undefined;
      return fs.mkdtemp(path.join(await this.processDir(), 'r'));
    });
    return { dir, remove: () => fs.rm(dir, { recursive: true, force: true }) };
  }

  /** A directory for this process's CGI scripts (removed with the process's directory). */
  async scriptDir(): Promise<string> {
    return path.join(await this.processDir(), SCRIPTS);
  }
}

async function removeStale(root: string, host: string): Promise<void> {
  const mine = `${PREFIX}${host}-`;
  for (const name of await fs.readdir(root).catch(() => [] as string[])) {
    if (!name.startsWith(mine)) continue;
    const pid = Number(/^(\d+)-/.exec(name.slice(mine.length))?.[1]);
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue;
    await fs.rm(path.join(root, name), { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Does the request carry a body (a length above zero, or chunked)? */
export function hasBody(req: IncomingMessage): boolean {
  const len = req.headers['content-length'];
  if (len !== undefined) return Number(len) > 0;
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * Writes the request body to `file`, refusing it (BodyTooLarge) as soon as it is known to be
 * larger than `maxBytes`: from Content-Length before reading, or while counting a chunked body.
 * On refusal the request is left paused (not destroyed), so a 413 can still be answered.
 * Rejects when `signal` aborts (the client left or the deadline passed). Returns the size.
 */
export function receiveBody(
  req: IncomingMessage,
  file: string,
  maxBytes: number,
  signal: AbortSignal,
): Promise<number> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    const out = createWriteStream(file, { mode: 0o600 });
    let size = 0;
    let settled = false;
    const settle = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', settle);
      req.off('close', onClose);
      signal.removeEventListener('abort', onAbort);
      if (err === undefined) {
        out.once('error', reject);
        out.end(() => resolve(size));
        return;
      }
      req.pause();
      out.destroy();
      reject(err instanceof Error ? err : new Error('request body not received'));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) settle(new BodyTooLarge());
      else if (!out.write(chunk)) {
        req.pause();
        out.once('drain', () => req.resume());
      }
    };
    const onEnd = () => settle(undefined);
    const onClose = () => {
      if (!req.complete) settle(new Error('client closed the connection during the request body'));
    };
    const onAbort = () => settle(signal.reason ?? new Error('aborted'));
    out.on('error', settle);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', settle);
    req.on('close', onClose);
    if (req.destroyed) onClose();
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort);
  });
}
