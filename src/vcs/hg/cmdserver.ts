/**
 * Mercurial's command server (`hg serve --cmdserver pipe`) with one of Triad's extensions:
 * `triadread` (contents reads, triadread.py) or `triadops` (operations, triadops.py) add a server
 * command next to `runcommand`; `triadfresh` (triadfresh.py) makes `runcommand` see the
 * repository as it is on disk (the bookkeeping servers, `CommandServers`). A request is the command's name, a newline, a 4-byte
 * big-endian length and the data; the answer is frames (channel byte, 4-byte length, data) up to
 * the result frame `r`.
 */
import { fileURLToPath } from 'node:url';
import { HG } from '../constants.ts';
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
 * Command servers for short `hg` commands (the push bookkeeping of refs.ts: snapshots,
 * commit lists, a file at a revision), one per repository, at most `max` (least recently used
 * closed first), idle ones closed after `idleMs`. `runcommand` reloads the repository before each
 * command, so a push by another process is seen at once; a command costs a few milliseconds
 * instead of a Python start.
 */
export class CommandServers {
  private readonly servers = new Map<string, { proc: Respawning; lastUsed: number }>();
  private readonly max: number;
  private readonly idleMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(opts: { max: number; idleMs: number }) {
    this.max = opts.max;
    this.idleMs = opts.idleMs;
  }

  /** Standard output of `hg ARGS` on the repository `dir` (throws `HgCommandFailed`). */
  async run(dir: string, args: string[]): Promise<string> {
    const proc = this.server(dir);
    const body = Buffer.from(args.join('\0'), 'utf8');
    const answer = await proc.run((p) => p.request(frame('runcommand', body), resultParser));
    const code = answer.result.length >= 4 ? answer.result.readInt32BE(0) : -1;
    if (code !== 0) throw new HgCommandFailed(`hg ${args[0] ?? ''} failed (${code}): ${answer.err.trim()}`);
    return answer.out.toString('utf8');
  }

  /** Starts the server of `dir` now, if it is not running, without waiting for it. */
  warm(dir: string): void {
    this.server(dir).get();
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    for (const dir of [...this.servers.keys()]) this.drop(dir);
  }

  private server(dir: string): Respawning {
    let slot = this.servers.get(dir);
    if (slot !== undefined) this.servers.delete(dir);
    slot ??= {
      proc: new Respawning(() => {
        const { proc, hello } = startServer(dir, 'triadfresh');
        hello.catch(() => undefined);
        return proc;
      }),
      lastUsed: 0,
    };
    slot.lastUsed = Date.now();
    this.servers.set(dir, slot);
    for (const key of this.servers.keys()) {
      if (this.servers.size <= this.max) break;
      if (key !== dir) this.drop(key);
    }
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.closeIdle(), Math.min(this.idleMs, 30_000));
      this.timer.unref();
    }
    return slot.proc;
  }

  private closeIdle(): void {
    const now = Date.now();
    for (const [dir, slot] of this.servers) {
      if (now - slot.lastUsed >= this.idleMs && !slot.proc.busy()) this.drop(dir);
    }
    if (this.servers.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private drop(dir: string): void {
    const slot = this.servers.get(dir);
    if (slot === undefined) return;
    this.servers.delete(dir);
    slot.proc.close();
  }
}
