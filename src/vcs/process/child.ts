/**
 * A process the spawner started for the server (`spawnChild`, spawner.ts): the server's view of
 * it, shaped like Node's `ChildProcess` where the code needs it (`pid`, `stdio`, `exitCode`,
 * `signalCode`, `kill`), with promises for its exit and its close instead of events.
 */
import type { Socket } from 'node:net';

/**
 * A standard stream (or fd 3 and beyond) of a spawned process:
 * - `ignore`: /dev/null;
 * - `pipe`: a socket between the process and the server (`Child.stdio[i]`);
 * - `collect`: output kept by the spawner (64 KiB) and given with the exit (`Child.stderr`);
 * - `hold`: a pipe the spawner keeps, written through `Child.write` (a lifeline, cgi.ts);
 * - `{ file }`: that file, opened read-only;
 * - `{ socket }`: this socket's descriptor (an HTTP connection, or a pipe of another process); the
 *   server stops reading it, as Node's own spawn does with a socket it gives a child.
 */
export type Slot = 'ignore' | 'pipe' | 'collect' | 'hold' | { file: string } | { socket: Socket };

type Handle = { reading: boolean; readStop(): number };

/** Sockets whose reading `stopReading` stopped and nothing resumed yet. */
const stopped = new WeakSet<Socket>();

/**
 * Stops this process from reading `socket`, whose descriptor is given to another process, the way
 * Node's spawn does for a socket in a child's stdio (the same internal fields); `resumeReading`
 * reads it again. Answers the socket's libuv handle, which is what is sent. Throws for a socket
 * already closed.
 */
export function stopReading(socket: Socket): unknown {
  const internal = socket as unknown as {
    _handle?: Handle | null;
    readableFlowing: boolean | null;
    _readableState: { reading: boolean };
  };
  const handle = internal._handle;
  if (handle === undefined || handle === null || socket.destroyed) throw new Error('the socket is closed');
  handle.reading = false;
  handle.readStop();
  socket.pause();
  internal.readableFlowing = false;
  internal._readableState.reading = false;
  stopped.add(socket);
  return handle;
}

/** Reads `socket` again after `stopReading`, once (later calls, or a socket gone, do nothing). */
export function resumeReading(socket: Socket): void {
  if (!stopped.delete(socket) || socket.destroyed) return;
  socket.resume();
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null };

export class Child {
  readonly pid: number;
  /** The `pipe` slots' sockets (null for the other slots). */
  readonly stdio: readonly (Socket | null)[];
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  /** What the `collect` slots wrote (complete once exited). */
  stderr = '';
  /** Resolves on the exit. */
  readonly exited: Promise<Exit>;
  /** Resolves once exited and every socket of `stdio` closed (Node's 'close'). */
  readonly closed: Promise<Exit>;
  private readonly group: boolean;
  private readonly writeHeld: (slot: number, data: string, end: boolean) => void;
  private done = false;
  private resolveExit!: (e: Exit) => void;

  constructor(
    pid: number,
    group: boolean,
    stdio: (Socket | null)[],
    writeHeld: (slot: number, data: string, end: boolean) => void,
  ) {
    this.pid = pid;
    this.group = group;
    this.stdio = stdio;
    this.writeHeld = writeHeld;
    for (const s of stdio) s?.on('error', () => undefined);
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    const socketsClosed = stdio.map((s) =>
      s === null || s.destroyed ? Promise.resolve() : new Promise<void>((r) => s.once('close', () => r())),
    );
    this.closed = Promise.all([this.exited, ...socketsClosed]).then(([e]) => e);
  }

  get stdin(): Socket | null {
    return this.stdio[0] ?? null;
  }
  get stdout(): Socket | null {
    return this.stdio[1] ?? null;
  }

  /** Whether the exit is known. */
  get ended(): boolean {
    return this.done;
  }

  /**
   * Signals the process, or its whole group when it leads one (a group may outlive its leader:
   * callers decide whether that still matters). Nothing when it is gone.
   */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (!this.group && this.done) return;
    try {
      process.kill(this.group ? -this.pid : this.pid, signal);
    } catch {
      // gone
    }
  }

  /** Writes `data` to a `hold` slot, ending it when `end`. */
  write(slot: number, data: string, end = false): void {
    this.writeHeld(slot, data, end);
  }

  /** Told by the spawner (or on its death). */
  exit(code: number | null, signal: NodeJS.Signals | null, stderr: string): void {
    if (this.done) return;
    this.done = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.stderr = stderr;
    this.resolveExit({ code, signal });
  }
}
