/**
 * The server's side of the spawner (spawner-child.ts): one small Node process per server process,
 * started on first use, that starts the short commands of `runCommand` (run.ts) so the server
 * itself never forks for them. Messages use Node's advanced serialization, so input and output
 * travel as bytes.
 *
 * If the spawner dies, the calls under way fail (their process groups are killed from here) and
 * the next call starts a new one. `closeSpawner` ends it (the spawner then kills what it still
 * runs); a server that dies disconnects it, with the same effect.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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

type Reply =
  | { id: number; started: number }
  | { id: number; ok: true; code: number; stdout: Uint8Array; stderr: string }
  | { id: number; ok: false; timeout: boolean; message: string; stderr: string };

type Call = { cmd: string; resolve: (o: SpawnOutcome) => void; pid?: number };

class Spawner {
  private readonly child: ChildProcess;
  private readonly calls = new Map<number, Call>();
  private nextId = 1;
  dead = false;

  constructor() {
    // A small heap: it holds one message at a time and the output of the commands under way.
    this.child = spawn(process.execPath, ['--max-old-space-size=64', SCRIPT], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
      env: process.env,
    });
    this.child.on('message', (m: Reply) => this.onReply(m));
    const died = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      for (const [, call] of this.calls) {
        // The spawner cannot clean up after itself if it was killed: its groups die here.
        if (call.pid !== undefined) killGroup(call.pid);
        call.resolve({ ok: false, timeout: false, message: `${call.cmd}: the spawner ${why}`, stderr: '' });
      }
      this.calls.clear();
    };
    this.child.on('error', (e) => died(`failed: ${e.message}`));
    this.child.on('exit', (code, signal) => died(`exited (${signal ?? code ?? '?'})`));
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
      // The channel keeps the server alive only while a call is under way.
      this.child.channel?.ref();
      const fail = (why: string) => {
        if (!this.calls.delete(id)) return;
        this.idle();
        resolve({ ok: false, timeout: false, message: `${cmd}: the spawner is gone (${why})`, stderr: '' });
      };
      // The environment is copied: `process.env` itself cannot be serialized.
      const msg = {
        id,
        cmd,
        args: [...args],
        ...req,
        env: req.env === undefined ? undefined : { ...req.env },
      };
      try {
        this.child.send(msg, (e) => {
          if (e !== null) fail(e.message);
        });
      } catch (e) {
        fail((e as Error).message);
      }
    });
  }

  close(): void {
    if (this.child.connected) this.child.disconnect();
  }

  private onReply(m: Reply): void {
    const call = this.calls.get(m.id);
    if (call === undefined) return;
    if ('started' in m) {
      call.pid = m.started;
      return;
    }
    this.calls.delete(m.id);
    this.idle();
    if (m.ok)
      call.resolve({ ...m, stdout: Buffer.from(m.stdout.buffer, m.stdout.byteOffset, m.stdout.byteLength) });
    else call.resolve(m);
  }

  private idle(): void {
    if (this.calls.size > 0) return;
    this.child.channel?.unref();
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

let current: Spawner | undefined;

function spawner(): Spawner {
  if (current?.usable !== true) current = new Spawner();
  return current;
}

/** Runs one command through this process's spawner (started if there is none or it died). */
export function spawnRun(cmd: string, args: readonly string[], req: SpawnRequest): Promise<SpawnOutcome> {
  return spawner().run(cmd, args, req);
}

/** The spawner's process id, if one is running. */
export function spawnerPid(): number | undefined {
  return current === undefined || current.dead ? undefined : current.pid;
}

/** Ends the spawner (commands it still runs are killed); the next call starts a new one. */
export function closeSpawner(): void {
  current?.close();
  current = undefined;
}
