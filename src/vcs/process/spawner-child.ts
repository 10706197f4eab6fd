/**
 * The spawner: a small long-lived Node process that starts the server's processes for it
 * (spawner.ts is the server's side). Forking a process copies its page tables, which for a
 * server of a few hundred megabytes blocks its event loop for tens of milliseconds per process;
 * forking this process costs about a millisecond, and the server only sends it a message.
 *
 * Two kinds of request:
 * - `run`: a short command, in its own process group, stdin the given input; its output and exit
 *   code are sent back in one reply; on timeout or too much output the group is killed.
 * - `spawn`: a process whose standard streams the server uses itself. Each `pipe` slot's end is
 *   sent to the server as a handle (a Unix socket: libuv makes a child's pipes socket pairs), so
 *   the bytes go between the process and the server directly; a `collect` slot's text (stderr)
 *   comes with the exit; a `hold` slot is a pipe the spawner keeps and writes to when asked (the
 *   lifeline of the backends, cgi.ts); a `given` slot is a descriptor the server sent before
 *   (`fd` messages: an HTTP connection, a pipe); a `file` slot is a file opened read-only here.
 *
 * When the server goes away (the IPC channel disconnects: a close, or the server died), every
 * process still running is killed (its group when it has one) and the spawner exits, so no
 * process outlives its server.
 *
 * Standalone on purpose (Node built-ins only): it is started as `node spawner-child.ts`.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';

type RunRequest = {
  t: 'run';
  id: number;
  cmd: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  input?: string | Uint8Array;
  timeoutMs?: number;
  maxBytes: number;
};

export type Slot = 'ignore' | 'pipe' | 'collect' | 'hold' | 'given' | { file: string };

type SpawnRequest = {
  t: 'spawn';
  id: number;
  cmd: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  detached: boolean;
  stdio: Slot[];
};

type Request =
  | RunRequest
  | SpawnRequest
  | { t: 'fd'; id: number; slot: number }
  | { t: 'write'; id: number; slot: number; data: string; end: boolean };

/** A raw libuv handle, as received (net.Native) or taken from a stream. */
type RawHandle = { fd: number; close(): void; readStop(): number; reading: boolean };

/** What the spawner answers the server (its IPC protocol; `spawner.ts` reads the same type). */
export type Reply =
  | { id: number; started: number }
  | { id: number; ok: true; code: number; stdout: Uint8Array; stderr: string }
  | { id: number; ok: false; timeout: boolean; message: string; stderr: string }
  | { t: 'fd'; id: number; slot: number }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null; stderr: string }
  | { t: 'error'; id: number; message: string };

/** Processes running, by pid: whether they lead a group of their own. */
const running = new Map<number, boolean>();
/** Descriptors the server sent for a `spawn` still to come, by request and slot. */
const given = new Map<number, Map<number, RawHandle>>();
/** The `hold` slots of spawned processes, by request. */
const held = new Map<number, Map<number, Writable>>();

const STDERR_KEPT = 64 * 1024;

function kill(pid: number | undefined, group = true): void {
  try {
    if (pid !== undefined) process.kill(group ? -pid : pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function reply(r: Reply, handle?: Socket, sent?: () => void): void {
  // A send to a server that just went away fails here, not as an uncaught error.
  if (process.connected) process.send?.(r, handle, {}, () => sent?.());
  else sent?.();
}

/** Kills every process still running, then exits: no process outlives the spawner. */
function end(code: number): never {
  for (const [pid, group] of running) kill(pid, group);
  process.exit(code);
}

/**
 * Keeps `child` in `running` until `until`: a short command's 'close' (its group may outlive its
 * leader while something there holds its output open); a spawned process's 'exit' (its pipes are
 * the server's, so no 'close' comes here).
 */
function track(child: ChildProcess, group: boolean, until: 'close' | 'exit'): void {
  const pid = child.pid;
  if (pid === undefined) return;
  running.set(pid, group);
  child.once(until, () => running.delete(pid));
  child.once('error', () => running.delete(pid));
}

function run(req: RunRequest): void {
  const { id, cmd, args } = req;
  const child = spawn(cmd, args, {
    cwd: req.cwd,
    env: req.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  track(child, true, 'close');
  if (pid !== undefined) reply({ id, started: pid });
  const out: Buffer[] = [];
  let outLen = 0;
  let err = '';
  let failure: { timeout: boolean; message: string } | undefined;
  const timer =
    req.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          failure = {
            timeout: true,
            message: `${cmd} ${args[0] ?? ''}: timed out after ${req.timeoutMs} ms`,
          };
          kill(pid);
        }, req.timeoutMs);
  child.stdout.on('data', (d: Buffer) => {
    outLen += d.length;
    if (outLen > req.maxBytes) {
      failure ??= {
        timeout: false,
        message: `${cmd} ${args[0] ?? ''}: more than ${req.maxBytes} bytes of output`,
      };
      kill(pid);
      return;
    }
    out.push(d);
  });
  child.stderr.on('data', (d: Buffer) => {
    if (err.length < STDERR_KEPT) err += d.toString('utf8');
  });
  child.stdin.on('error', () => undefined);
  child.on('error', (e) => {
    clearTimeout(timer);
    reply({ id, ok: false, timeout: false, message: `${cmd}: ${e.message}`, stderr: err });
  });
  child.on('close', (code) => {
    clearTimeout(timer);
    if (failure !== undefined) reply({ id, ok: false, ...failure, stderr: err });
    else reply({ id, ok: true, code: code ?? 1, stdout: Buffer.concat(out), stderr: err });
  });
  child.stdin.end(req.input ?? '');
}

/**
 * The libuv handle of a stream of a child just spawned, its reading stopped: Node starts reading
 * a child's output pipe at once, and bytes read here before the handle is sent would be lost.
 * Nothing can have been read yet (this runs in the tick that spawned the child).
 */
function detach(stream: unknown): Socket {
  const handle = (stream as { _handle?: RawHandle })._handle;
  if (handle === undefined) throw new Error('a stdio stream without a handle');
  handle.reading = false;
  handle.readStop();
  return stream as Socket;
}

function start(req: SpawnRequest): void {
  const { id } = req;
  const fds = given.get(id) ?? new Map<number, RawHandle>();
  given.delete(id);
  const opened: number[] = [];
  let child: ChildProcess;
  try {
    const stdio: StdioOptions = req.stdio.map((slot, i) => {
      if (typeof slot === 'object') {
        const fd = fs.openSync(slot.file, 'r');
        opened.push(fd);
        return fd;
      }
      if (slot === 'given') {
        const h = fds.get(i);
        if (h === undefined) throw new Error(`slot ${i}: no descriptor given`);
        return h.fd;
      }
      return slot === 'ignore' ? 'ignore' : 'pipe';
    });
    child = spawn(req.cmd, req.args, { cwd: req.cwd, env: req.env, detached: req.detached, stdio });
  } catch (e) {
    reply({ t: 'error', id, message: `${req.cmd}: ${(e as Error).message}` });
    return;
  } finally {
    // The child has its own copies now (or there is no child).
    for (const fd of opened) fs.closeSync(fd);
    for (const h of fds.values()) h.close();
  }
  const pid = child.pid;
  if (pid === undefined) {
    // Not startable (ENOENT and the like): 'error' follows, and no exit.
    child.once('error', (e) => reply({ t: 'error', id, message: `${req.cmd}: ${e.message}` }));
    return;
  }
  track(child, req.detached, 'exit');
  reply({ id, started: pid });
  let stderr = '';
  const holds = new Map<number, Writable>();
  req.stdio.forEach((slot, i) => {
    const stream = child.stdio[i];
    if (stream === null || stream === undefined) return;
    if (slot === 'pipe') {
      // Sent, then closed here once the server has it (Node closes a sent socket on its ACK).
      reply({ t: 'fd', id, slot: i }, detach(stream));
    } else if (slot === 'collect') {
      stream.on('data', (d: Buffer) => {
        if (stderr.length < STDERR_KEPT) stderr += d.toString('utf8');
      });
    } else if (slot === 'hold') {
      const w = stream as Writable;
      w.on('error', () => undefined);
      holds.set(i, w);
    }
  });
  if (holds.size > 0) held.set(id, holds);
  // The exit is told once the collected output is complete ('close' waits for the held pipes
  // too, which stay open until the server ends them).
  let code: number | null = null;
  let signal: NodeJS.Signals | null = null;
  let waiting = 1 + req.stdio.filter((s) => s === 'collect').length;
  const settle = () => {
    if (--waiting > 0) return;
    reply({ t: 'exit', id, code, signal, stderr });
  };
  child.once('exit', (c, s) => {
    code = c;
    signal = s;
    settle();
  });
  req.stdio.forEach((slot, i) => {
    if (slot === 'collect') child.stdio[i]?.once('close', settle);
  });
}

function write(id: number, slot: number, data: string, endIt: boolean): void {
  const holds = held.get(id);
  const w = holds?.get(slot);
  if (holds === undefined || w === undefined) return;
  if (!endIt) {
    w.write(data);
    return;
  }
  w.end(data);
  holds.delete(slot);
  if (holds.size === 0) held.delete(id);
}

process.on('message', (m: Request, handle?: RawHandle) => {
  switch (m.t) {
    case 'run':
      run(m);
      break;
    case 'fd': {
      if (handle === undefined) break;
      const slots = given.get(m.id) ?? new Map<number, RawHandle>();
      slots.set(m.slot, handle);
      given.set(m.id, slots);
      break;
    }
    case 'spawn':
      start(m);
      break;
    case 'write':
      write(m.id, m.slot, m.data, m.end);
      break;
  }
});
process.on('disconnect', () => end(0));
process.on('uncaughtException', () => end(1));
// A terminal's Ctrl-C or a signal to the server's process group must not end the spawner under a
// server that is still draining: it ends with its IPC channel.
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
