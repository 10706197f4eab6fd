import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import type { Socket } from 'node:net';
import path from 'node:path';
import { niced } from './priority.ts';
import { VcsCommandFailed } from './run.ts';
import { resumeReading, spawnChild, type Child } from './spawner.ts';

/** Formats of source archives (`VcsDriver.archive`). */
export type ArchiveFormat = 'tar.gz' | 'zip';

/**
 * Streams the standard output of a command as it is produced (archives: git archive, hg archive;
 * a file's bytes: git cat-file, hg cat, fossil cat), chunk by chunk as the consumer asks, so the
 * pipe's backpressure bounds memory. The command runs in its own process group: a consumer that
 * stops early (a client gone) kills it, and so does `signal` aborting (the stream then ends with
 * `VcsCommandFailed`); a non-zero exit ends the stream with `VcsCommandFailed`. It runs `nice`
 * niceness steps below the server (priority.ts).
 */
export async function* commandStream(
  cmd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
  opts: { socket?: Socket; spawned?: (child: Child) => void; signal?: AbortSignal } = {},
): AsyncGenerator<Buffer> {
  // With `socket`: the process also gets a pipe on its standard input and the socket as its fd 3
  // (see `commandToSocket` for why not lower), for a producer told by `spawned`'s caller to write
  // there itself (triadcat.py).
  const [command, argv] = niced(nice, cmd, args);
  const { socket } = opts;
  const child = await spawnChild(command, argv, {
    env,
    stdio: socket === undefined ? ['ignore', 'pipe', 'collect'] : ['pipe', 'pipe', 'collect', { socket }],
  });
  opts.spawned?.(child);
  const { signal } = opts;
  const stop = () => {
    if (!child.ended) child.kill();
  };
  if (signal?.aborted === true) stop();
  else signal?.addEventListener('abort', stop, { once: true });
  let done = false;
  try {
    for await (const chunk of child.stdout as AsyncIterable<Buffer>) yield chunk;
    const { code } = await child.exited;
    done = true;
    if (code !== 0) throw new VcsCommandFailed(`${cmd} ${args[0] ?? ''} failed`, code, child.stderr);
  } finally {
    signal?.removeEventListener('abort', stop);
    if (!done && !child.ended) child.kill();
    child.stdout?.destroy();
    // Not handed over after all: this process reads the connection again once the command is gone
    // (after a hand-off, `producerExit` did already).
    if (socket !== undefined) void child.exited.then(() => resumeReading(socket));
  }
}

/**
 * For a command that can only write its archive to a file (Fossil builds it in memory and opens
 * the output path itself, which a socket cannot be): runs it with a temporary file, then streams
 * that file and removes it. `signal` stops the command (`commandStream`).
 */
export async function* fileOutputStream(
  cmd: string,
  args: (out: string) => readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
  signal?: AbortSignal,
): AsyncGenerator<Buffer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-archive-'));
  try {
    const out = path.join(dir, 'archive');
    const opts = signal === undefined ? {} : { signal };
    for await (const chunk of commandStream(cmd, args(out), env, nice, opts)) void chunk; // prints nothing
    yield* createReadStream(out) as AsyncIterable<Buffer>;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * A file's bytes from a process of its own, opened: `size` and the first `head` bytes are known
 * before anything is sent (a response's Content-Length and type come from them); `body` gives
 * every byte, the head included. Ending `body` early (its `return`, as a stream pipeline does
 * for a client gone) kills the process, also when `body` was never read.
 */
export type OpenedFile = {
  size: number;
  head: Buffer;
  body: AsyncIterable<Buffer>;
  /**
   * Present when the caller offered a socket (`socket` of `VcsDriver.catFile`) and the producer
   * can write to it itself: call it instead of reading `body`, once the response's headers are on
   * the wire and nothing else is queued on the socket. The whole file then goes from the process
   * to the socket in the kernel (Node never holds the bytes); resolves when the process exited 0
   * having written them, rejects otherwise (the response is then short: destroy the socket). It
   * ends whatever process `body` would have read.
   */
  handOff?: () => Promise<void>;
  /**
   * With `handOff`: the process that writes to the connection makes it blocking (see
   * `openFileClosing`), so the response must say `Connection: close` and the connection is closed
   * once the hand-off ends, never read or written by the server again.
   */
  closes?: boolean;
};

/**
 * Runs a command whose standard output is `socket` (an HTTP response's connection, the headers
 * already sent): the bytes never pass through Node. The socket's descriptor is given to the child
 * as its fd 3 and moved onto its standard output by `sh` — libuv makes a child's fds 0-2 blocking,
 * and that flag belongs to the connection both processes share, so handing it over as fd 1 directly
 * would leave Node's own socket blocking. The command must cope with a non-blocking standard output
 * (git's writes poll on EAGAIN). The socket closing first (a client gone) kills the command's
 * process group; a non-zero exit rejects with `VcsCommandFailed`.
 */
export async function commandToSocket(
  cmd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
  socket: Socket,
): Promise<void> {
  const [command, argv] = niced(nice, cmd, args);
  const child = await spawnChild('/bin/sh', ['-c', 'exec "$0" "$@" >&3 3>&-', command, ...argv], {
    env,
    stdio: ['ignore', 'ignore', 'collect', { socket }],
  });
  return producerExit(child, cmd, args, socket);
}

/**
 * The exit of a process writing to `socket` (its `exit`: its standard output may be a pipe no one
 * reads to the end); the socket closing first kills its process group.
 */
export function producerExit(
  child: Child,
  cmd: string,
  args: readonly string[],
  socket: Socket,
  resume = true,
): Promise<void> {
  const kill = () => {
    if (!child.ended) child.kill();
  };
  socket.once('close', kill);
  if (socket.destroyed) kill();
  return child.exited.then(({ code }) => {
    socket.off('close', kill);
    // This process stopped reading the socket it gave away (so that both do not read it): the
    // next request on a kept-alive connection is read again from here on.
    if (resume) resumeReading(socket);
    if (code !== 0) throw new VcsCommandFailed(`${cmd} ${args[0] ?? ''} failed`, code, child.stderr);
  });
}

/**
 * Opens a file's bytes from `source` (a `commandStream`): with `size` given (the reader knew it),
 * the output is the bytes; without it, the output's first line is the size in decimal, then the
 * bytes (as triadcat.py writes them). Reads until the first `head` bytes (or all of a shorter
 * file) are there. A process that writes more or fewer bytes than the size ends `body` with an
 * error (the response is cut short, never wrong).
 */
export async function openFile(
  source: AsyncIterable<Buffer>,
  opts: { size?: number; head: number; what: string; unread?: (chunks: Buffer[]) => void },
): Promise<OpenedFile> {
  const it = source[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let have = 0;
  let size = opts.size;
  let sent = 0;
  const fail = async (message: string): Promise<never> => {
    await it.return?.();
    throw new Error(`${opts.what}: ${message}`);
  };
  try {
    let line = Buffer.alloc(0);
    while (size === undefined) {
      const r = await it.next();
      if (r.done === true) return await fail('no size line');
      line = Buffer.concat([line, r.value]);
      const nl = line.indexOf(10);
      if (nl < 0) {
        if (line.length > 32) return await fail('no size line');
        continue;
      }
      const text = line.toString('latin1', 0, nl);
      if (!/^\d{1,15}$/.test(text)) return await fail(`bad size line ${JSON.stringify(text.slice(0, 40))}`);
      size = Number(text);
      if (nl + 1 < line.length) chunks.push(line.subarray(nl + 1));
      have = line.length - nl - 1;
    }
    while (have < Math.min(opts.head, size)) {
      const r = await it.next();
      if (r.done === true) break; // short: reported when `body` ends
      chunks.push(r.value);
      have += r.value.length;
    }
  } catch (e) {
    await it.return?.();
    throw e;
  }
  const total = size;
  const pending = [...chunks];
  // (`openFileClosing` sends these itself when `body` is never read)
  opts.unread?.(pending);
  const count = async (r: IteratorResult<Buffer>): Promise<IteratorResult<Buffer>> => {
    if (r.done === true) {
      if (sent !== total) await fail(`${sent} bytes, ${total} announced`);
      return r;
    }
    sent += r.value.length;
    if (sent > total) await fail(`more than the ${total} bytes announced`);
    return r;
  };
  const body: AsyncIterableIterator<Buffer> = {
    [Symbol.asyncIterator]: () => body,
    next: async () => {
      const first = pending.shift();
      return count(first !== undefined ? { done: false, value: first } : await it.next());
    },
    return: async () => {
      await it.return?.();
      return { done: true, value: undefined };
    },
  };
  const head = Buffer.concat(chunks, have);
  return { size: total, head: head.subarray(0, Math.min(opts.head, head.length)), body };
}

/**
 * `openFile` for a command that cannot write to a non-blocking socket (`fossil cat` writes with
 * stdio and gives up on EAGAIN), reading its standard output from a pipe. With `socket`, adds a
 * hand-off for a response that then closes its connection (`closes`): the bytes the server has
 * already read from the pipe are written to the socket (still non-blocking), then `cat` gets the
 * pipe as its standard input and the socket as its standard output, so the rest goes from the
 * command to the connection without passing through Node, and the command runs once. libuv makes
 * a child's fds 0-2 blocking, and that flag belongs to the connection Node shares: from then on the
 * server neither reads (it stops reading a socket it gives to a child, and does not resume) nor
 * writes it, and the caller closes it when the hand-off ends. The socket closing first kills both
 * processes; a non-zero exit of either rejects with `VcsCommandFailed`.
 */
export async function openFileClosing(
  cmd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
  opts: { size: number; head: number; what: string; socket?: Socket },
): Promise<OpenedFile> {
  let child: Child | undefined;
  let unread: Buffer[] = [];
  const source = commandStream(cmd, args, env, nice, { spawned: (c) => (child = c) });
  const opened = await openFile(source, { ...opts, unread: (chunks) => (unread = chunks) });
  const socket = opts.socket;
  // A file read whole already (a small one) goes out from memory, the connection kept.
  const held = unread.reduce((n, c) => n + c.length, 0);
  if (socket === undefined || child === undefined || held >= opts.size) return opened;
  const producer = child;
  const stop = () => void opened.body[Symbol.asyncIterator]().return?.();
  const handOff = async () => {
    const out = producer.stdout;
    if (out === null) throw new Error(`${opts.what}: no output`);
    socket.once('close', stop);
    try {
      let written = 0;
      // What Node holds already goes first, while the socket is still non-blocking; the loop ends
      // with nothing buffered, and `cat` is spawned in that same tick (Node then stops reading).
      for (;;) {
        const chunks = unread.splice(0);
        for (let c: unknown = out.read(); c !== null; c = out.read()) chunks.push(c as Buffer);
        if (chunks.length === 0) break;
        for (const c of chunks) socket.write(c);
        written += chunks.reduce((n, c) => n + c.length, 0);
        await drained(socket);
        if (socket.destroyed) throw new Error(`${opts.what}: the connection closed`);
      }
      if (written < opts.size) {
        const [command, argv] = niced(nice, 'cat', []);
        const cat = await spawnChild(command, argv, { env, stdio: [{ socket: out }, { socket }, 'collect'] });
        out.destroy(); // cat holds the pipe now; the command sees it closed if cat goes
        await producerExit(cat, 'cat', [], socket, false);
      } else out.destroy(); // all sent: a command writing more meets a closed pipe
      const { code } = await producer.exited;
      if (code !== 0) throw new VcsCommandFailed(`${cmd} ${args[0] ?? ''} failed`, code, producer.stderr);
    } catch (e) {
      stop();
      throw e;
    } finally {
      socket.off('close', stop);
    }
  };
  return { ...opened, handOff, closes: true };
}

/** Resolves when nothing is queued on `socket` any more (or it closed). */
export function drained(socket: Socket): Promise<void> {
  if (socket.writableLength === 0 || socket.destroyed) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}

/**
 * A plain file's bytes as an `OpenedFile` (a raw download kept by the cache, `RawCache`): the
 * first `head` bytes read at once; `body` opens the file only when read. With `socket`, a hand-off
 * in which `cat` writes the file to the connection; `cat` gives up on a non-blocking standard
 * output, so it gets the connection as its own (made blocking: see `openFileClosing`) and the
 * response closes the connection (`closes`).
 */
export async function openPlainFile(
  file: string,
  opts: { size: number; head: number; nice: number; socket?: Socket },
): Promise<OpenedFile> {
  const head = Buffer.alloc(Math.min(opts.head, opts.size));
  const fh = await fs.open(file, 'r');
  try {
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead !== head.length) throw new Error(`${file}: shorter than ${opts.size} bytes`);
  } finally {
    await fh.close();
  }
  async function* body(): AsyncGenerator<Buffer> {
    yield* createReadStream(file) as AsyncIterable<Buffer>;
  }
  const socket = opts.socket;
  if (socket === undefined) return { size: opts.size, head, body: body() };
  const handOff = async () => {
    const [command, argv] = niced(opts.nice, 'cat', [file]);
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' };
    const cat = await spawnChild(command, argv, { env, stdio: ['ignore', { socket }, 'collect'] });
    await producerExit(cat, 'cat', [file], socket, false);
  };
  return { size: opts.size, head, body: body(), handOff, closes: true };
}
