/**
 * The server's side of the spawner (spawner-child.ts): one small Node process per server process,
 * started on first use, that starts every VCS process for it, so the server itself never forks
 * (a fork copies the page tables of the whole server: tens of milliseconds of a blocked event loop
 * for a server of a few hundred megabytes). Messages use Node's advanced serialization, so input
 * and output travel as bytes; the standard streams of a spawned process (`spawnChild`) come back
 * as socket handles, so their bytes go between the process and the server directly.
 *
 * If the spawner dies, the calls under way fail and the processes it started are killed from
 * here (their groups when they have one) — all but one started in the instant before the spawner
 * died, whose pid it had not yet reported: that one is left with its pipes closed (a VCS command
 * then ends on its own). The next call starts a new spawner. `closeSpawner` ends it
 * (the spawner then kills what it still runs); a server that dies disconnects it, with the same
 * effect.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Child, resumeReading, stopReading, type Slot } from './child.ts';
import type { Reply } from './spawner-child.ts';

export { Child, resumeReading, type Slot } from './child.ts';

const SCRIPT = fileURLToPath(new URL('./spawner-child.ts', import.meta.url));

export type SpawnRequest = {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  input?: string | Buffer;
  /** None: no time limit. */
  timeoutMs?: number;
  maxBytes: number;
};

/** What became of a command: it ran to its exit, or it failed (timed out, too much output, not startable). */
export type SpawnOutcome =
  | { ok: true; code: number; stdout: Buffer; stderr: string }
  | { ok: false; timeout: boolean; message: string; stderr: string };

/** A process started by `spawnChild`: its own group when `detached` (default), standard streams by slot. */
export type ChildOptions = {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  detached?: boolean;
  stdio: Slot[];
};

type Call = { cmd: string; resolve: (o: SpawnOutcome) => void; pid?: number };

/** A `spawnChild` under way: started, its pipes arriving, then running until its exit. */
type Spawned = {
  cmd: string;
  opts: ChildOptions;
  resolve: (c: Child) => void;
  reject: (e: Error) => void;
  /** This server's sockets given to the process (`{socket}` slots): read again should it not start. */
  given: Socket[];
  pid?: number;
  sockets: (Socket | null)[];
  child?: Child;
};

class Spawner {
  private readonly child: ChildProcess;
  private readonly calls = new Map<number, Call>();
  private readonly spawned = new Map<number, Spawned>();
  private nextId = 1;
  dead = false;

  constructor() {
    // A small heap: it holds one message at a time and the output of the commands under way.
    this.child = spawn(process.execPath, ['--max-old-space-size=64', SCRIPT], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
      env: process.env,
    });
    this.child.on('message', (m: Reply, handle?: Socket) => this.onReply(m, handle));
    const died = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      for (const [, call] of this.calls) {
        // The spawner cannot clean up after itself if it was killed: its groups die here.
        if (call.pid !== undefined) killGroup(call.pid, true);
        call.resolve({ ok: false, timeout: false, message: `${call.cmd}: the spawner ${why}`, stderr: '' });
      }
      this.calls.clear();
      for (const [, s] of this.spawned) {
        if (s.pid !== undefined) killGroup(s.pid, s.opts.detached !== false);
        if (s.child !== undefined) s.child.exit(null, 'SIGKILL', '');
        else this.fail(s, new Error(`${s.cmd}: the spawner ${why}`));
      }
      this.spawned.clear();
      this.emptied();
    };
    // 'close', not 'exit': the exit can be seen before the messages still in the channel (a
    // process's pid among them) are read; the channel closes after them.
    this.child.on('error', (e) => died(`failed: ${e.message}`));
    this.child.on('close', (code, signal) => died(`exited (${signal ?? code ?? '?'})`));
    this.child.on('disconnect', () => died('disconnected'));
    // An idle spawner does not keep the server's process alive (it ends with the IPC channel).
    this.child.unref();
    this.idle();
  }

  /** Alive and connected: calls can be sent. */
  get usable(): boolean {
    return !this.dead && this.child.connected;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  run(cmd: string, args: readonly string[], req: SpawnRequest): Promise<SpawnOutcome> {
    return new Promise((resolve) => {
      const id = this.nextId++;
      this.calls.set(id, { cmd, resolve });
      const fail = (why: string) => {
        if (!this.calls.delete(id)) return;
        this.idle();
        resolve({ ok: false, timeout: false, message: `${cmd}: the spawner is gone (${why})`, stderr: '' });
      };
      // The environment is copied: `process.env` itself cannot be serialized.
      this.send({ t: 'run', id, cmd, args: [...args], ...req, env: copyEnv(req.env) }, fail);
    });
  }

  spawn(cmd: string, args: readonly string[], opts: ChildOptions): Promise<Child> {
    return new Promise((resolve, reject) => {
      // This process stops reading the sockets it gives, as Node's own spawn does (all of them
      // before anything is sent: a closed one fails the call with nothing given away).
      const given: Socket[] = [];
      const handles = new Map<number, unknown>();
      try {
        opts.stdio.forEach((slot, i) => {
          if (typeof slot !== 'object' || !('socket' in slot)) return;
          handles.set(i, stopReading(slot.socket));
          given.push(slot.socket);
        });
      } catch (e) {
        for (const socket of given) resumeReading(socket);
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      const id = this.nextId++;
      const entry: Spawned = { cmd, opts, resolve, reject, given, sockets: opts.stdio.map(() => null) };
      this.spawned.set(id, entry);
      const fail = (why: string) => {
        if (!this.spawned.delete(id)) return;
        this.idle();
        this.fail(entry, new Error(`${cmd}: the spawner is gone (${why})`));
      };
      // Each descriptor goes first, in a message of its own (one handle a message).
      for (const [i, handle] of handles) this.send({ t: 'fd', id, slot: i }, fail, handle);
      const slots = opts.stdio.map((slot) => (typeof slot === 'object' && 'socket' in slot ? 'given' : slot));
      this.send(
        {
          t: 'spawn',
          id,
          cmd,
          args: [...args],
          cwd: opts.cwd,
          env: copyEnv(opts.env),
          detached: opts.detached !== false,
          stdio: slots,
        },
        fail,
      );
    });
  }

  /** Writes to a `hold` slot of a spawned process (and ends it). */
  write(id: number, slot: number, data: string, end: boolean): void {
    // Nothing waits for an answer: the channel is not kept referenced for it.
    this.send({ t: 'write', id, slot, data, end }, () => undefined, undefined, false);
  }

  /**
   * Ends the spawner once the processes it started have exited (they were asked to: readers and
   * workers end on their closed input), at most `graceMs` later; what still runs then is killed.
   */
  async close(graceMs: number): Promise<void> {
    if (this.spawned.size > 0 && graceMs > 0 && this.child.connected) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.onEmpty = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    if (this.child.connected) this.child.disconnect();
  }

  private onEmpty: (() => void) | undefined;

  private emptied(): void {
    if (this.spawned.size > 0) return;
    const f = this.onEmpty;
    this.onEmpty = undefined;
    f?.();
  }

  /** Rejects a spawn that did not start: the sockets it was given are read again, those received closed. */
  private fail(s: Spawned, e: Error): void {
    for (const socket of s.given) resumeReading(socket);
    for (const socket of s.sockets) socket?.destroy();
    s.reject(e);
  }

  private send(msg: object, fail: (why: string) => void, handle?: unknown, keep = true): void {
    // The channel keeps the server alive only while something is under way.
    if (keep) this.child.channel?.ref();
    try {
      this.child.send(msg, handle as Socket | undefined, {}, (e) => {
        if (e !== null) fail(e.message);
      });
    } catch (e) {
      fail((e as Error).message);
    }
  }

  private onReply(m: Reply, handle?: Socket): void {
    const s = this.spawned.get(m.id);
    if (s !== undefined) {
      this.onSpawnReply(m.id, s, m, handle);
      return;
    }
    const call = this.calls.get(m.id);
    if (call === undefined) return;
    if ('started' in m) {
      call.pid = m.started;
      return;
    }
    if (!('ok' in m)) return;
    this.calls.delete(m.id);
    this.idle();
    if (m.ok)
      call.resolve({ ...m, stdout: Buffer.from(m.stdout.buffer, m.stdout.byteOffset, m.stdout.byteLength) });
    else call.resolve(m);
  }

  private onSpawnReply(id: number, s: Spawned, m: Reply, handle?: Socket): void {
    if ('started' in m) {
      s.pid = m.started;
    } else if ('t' in m && m.t === 'fd') {
      if (handle !== undefined) s.sockets[m.slot] = handle;
    } else if ('t' in m && m.t === 'exit') {
      this.spawned.delete(id);
      this.idle();
      this.born(id, s);
      s.child?.exit(m.code, m.signal, m.stderr);
      this.emptied();
      return;
    } else if ('t' in m && m.t === 'error') {
      this.spawned.delete(id);
      this.idle();
      this.fail(s, new Error(m.message));
      this.emptied();
      return;
    }
    // Ready once every pipe is here.
    if (s.pid !== undefined && s.opts.stdio.every((slot, i) => slot !== 'pipe' || s.sockets[i] !== null))
      this.born(id, s);
  }

  private born(id: number, s: Spawned): void {
    if (s.child !== undefined || s.pid === undefined) return;
    s.child = new Child(s.pid, s.opts.detached !== false, s.sockets, (slot, data, end) =>
      this.write(id, slot, data, end),
    );
    s.resolve(s.child);
  }

  private idle(): void {
    if (this.calls.size > 0 || this.spawned.size > 0) return;
    this.child.channel?.unref();
  }
}

function copyEnv(env: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv | undefined {
  return env === undefined ? undefined : { ...env };
}

function killGroup(pid: number, group: boolean): void {
  try {
    process.kill(group ? -pid : pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

let current: Spawner | undefined;
/** Processes asked of the spawners of this process so far (`spawnChild`), for tests and metrics. */
let spawnedTotal = 0;

function spawner(): Spawner {
  if (current?.usable !== true) current = new Spawner();
  return current;
}

/** Runs one command through this process's spawner (started if there is none or it died). */
export function spawnRun(cmd: string, args: readonly string[], req: SpawnRequest): Promise<SpawnOutcome> {
  return spawner().run(cmd, args, req);
}

/**
 * Starts a process through the spawner: resolves once it runs and its `pipe` slots are here
 * (rejects when it cannot start). Arguments are a vector, never given to a shell.
 */
export function spawnChild(cmd: string, args: readonly string[], opts: ChildOptions): Promise<Child> {
  spawnedTotal += 1;
  return spawner().spawn(cmd, args, opts);
}

/** How many processes `spawnChild` was asked for so far in this process. */
export function spawnedCount(): number {
  return spawnedTotal;
}

/** The spawner's process id, if one is running. */
export function spawnerPid(): number | undefined {
  return current === undefined || current.dead ? undefined : current.pid;
}

/**
 * Ends the spawner; the next call starts a new one. With `graceMs`, the processes it started get
 * that long to exit by themselves (those asked to end: closed readers, workers); whatever still
 * runs then is killed, as are the short commands under way.
 */
export async function closeSpawner(graceMs = 0): Promise<void> {
  const s = current;
  current = undefined;
  await s?.close(graceMs);
}
