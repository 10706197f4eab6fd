/**
 * Mercurial's command server (`hg serve --cmdserver pipe`) with one of Triad's extensions:
 * `triadread` (contents reads, triadread.py) or `triadops` (operations, triadops.py) add a server
 * command next to `runcommand`; `triadfresh` (triadfresh.py) makes `runcommand` see the
 * repository as it is on disk (the push bookkeeping's servers, below). A request is the
 * command's name, a newline, a 4-byte big-endian length and the data; the answer is frames
 * (channel byte, 4-byte length, data) up to the result frame `r`.
 */
import { fileURLToPath } from 'node:url';
import { HG } from '../constants.ts';
import type { PoolGroup, ProcessPool } from '../process/pool.ts';
import { PersistentProcess, Respawning, type Parser } from '../process/process.ts';

export type Extension = 'triadread' | 'triadops' | 'triadfresh';

const FILES: Record<Extension, string> = {
  triadread: fileURLToPath(new URL('./triadread.py', import.meta.url)),
  triadops: fileURLToPath(new URL('./triadops.py', import.meta.url)),
  triadfresh: fileURLToPath(new URL('./triadfresh.py', import.meta.url)),
};

/** Starts a command server on `dir` with the extension; `hello` resolves with its hello frame. */
export function startServer(
  dir: string,
  ext: Extension,
): { proc: PersistentProcess; hello: Promise<string> } {
  const proc = new PersistentProcess(
    HG.bin,
    ['serve', '--cmdserver', 'pipe', '-R', dir, '--config', `extensions.${ext}=${FILES[ext]}`],
    { env: HG.env, cwd: dir },
  );
  return { proc, hello: proc.request('', helloParser) };
}

/** One request of a server command. */
export function frame(command: 'triadread' | 'triadops' | 'runcommand', body: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([Buffer.from(`${command}\n`), head, body]);
}

/** An answer: what came on the output channel, the result frame's data, the error channel's text. */
export type Frames = { out: Buffer; result: Buffer; err: string };

/** Frames up to the result frame. */
export const resultParser: Parser<Frames> = (buf) => {
  const out: Buffer[] = [];
  let err = '';
  let at = 0;
  for (;;) {
    if (buf.length < at + 5) return undefined;
    const ch = String.fromCharCode(buf[at] ?? 0);
    const len = buf.readUInt32BE(at + 1);
    if (ch === 'I' || ch === 'L') throw new Error('hg command server asked for input');
    if (buf.length < at + 5 + len) return undefined;
    const data = buf.subarray(at + 5, at + 5 + len);
    at += 5 + len;
    if (ch === 'o') out.push(data);
    else if (ch === 'e') err += data.toString('utf8');
    else if (ch === 'r') return { value: { out: Buffer.concat(out), result: data, err }, used: at };
    else if (ch !== 'd' && ch.toUpperCase() === ch) throw new Error(`hg command server: channel ${ch}`);
  }
};

/** The hello frame the server writes first (its capabilities). */
const helloParser: Parser<string> = (buf) => {
  if (buf.length < 5) return undefined;
  const len = buf.readUInt32BE(1);
  if (buf.length < 5 + len) return undefined;
  return { value: buf.toString('utf8', 5, 5 + len), used: 5 + len };
};

/** A `runcommand` that returned non-zero (stderr in the message). */
export class HgCommandFailed extends Error {}

/**
 * The command servers for short `hg` commands (the push bookkeeping of refs.ts: snapshots,
 * commit lists, a file at a revision), one per repository in the server's pool. `runcommand`
 * reloads the repository before each command, so a push by another process is seen at once (a
 * change needs no invalidation); a command costs a few milliseconds instead of a Python start.
 */
const BOOKKEEPING: PoolGroup = { name: 'hg-cmd', max: 8, idleMs: 60_000, survivesChange: true };

function server(pool: ProcessPool, dir: string): Respawning {
  return pool.get(
    BOOKKEEPING,
    dir,
    () =>
      new Respawning(() => {
        const { proc, hello } = startServer(dir, 'triadfresh');
        hello.catch(() => undefined);
        return proc;
      }),
  );
}

/** Standard output of `hg ARGS` on the repository `dir` (throws `HgCommandFailed`). */
export async function runcommand(pool: ProcessPool, dir: string, args: string[]): Promise<string> {
  const body = Buffer.from(args.join('\0'), 'utf8');
  const answer = await server(pool, dir).run((p) => p.request(frame('runcommand', body), resultParser));
  const code = answer.result.length >= 4 ? answer.result.readInt32BE(0) : -1;
  if (code !== 0) throw new HgCommandFailed(`hg ${args[0] ?? ''} failed (${code}): ${answer.err.trim()}`);
  return answer.out.toString('utf8');
}

/** Starts the command server of `dir` now, if it is not running, without waiting for it. */
export function warm(pool: ProcessPool, dir: string): void {
  server(pool, dir).get();
}
