/**
 * The spawner: a small long-lived Node process that starts the server's short commands for it
 * (spawner.ts is the server's side). Forking a process copies its page tables, which for a
 * server of a few hundred megabytes blocks its event loop for tens of milliseconds per command;
 * forking this process costs about a millisecond, and the server only sends it a message.
 *
 * Each request runs one command in its own process group with stdin the given input; on timeout
 * or too much output the group is killed. When the server goes away (the IPC channel
 * disconnects: a close, or the server died), every group still running is killed and the
 * spawner exits, so no command outlives its server.
 *
 * Standalone on purpose (Node built-ins only): it is started as `node spawner-child.ts`.
 */
import { spawn } from 'node:child_process';

type Request = {
  id: number;
  cmd: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  input?: string | Uint8Array;
  timeoutMs?: number;
  maxBytes: number;
};

type Reply =
  | { id: number; started: number }
  | { id: number; ok: true; code: number; stdout: Uint8Array; stderr: string }
  | { id: number; ok: false; timeout: boolean; message: string; stderr: string };

const groups = new Set<number>();

function killGroup(pid: number | undefined): void {
  try {
    if (pid !== undefined) process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function reply(r: Reply): void {
  // A send to a server that just went away fails here, not as an uncaught error.
  if (process.connected) process.send?.(r, undefined, {}, () => undefined);
}

/** Kills every group still running, then exits: no command outlives the spawner. */
function end(code: number): never {
  for (const pid of groups) killGroup(pid);
  process.exit(code);
}

function run(req: Request): void {
  const { id, cmd, args } = req;
  const child = spawn(cmd, args, {
    cwd: req.cwd,
    env: req.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid !== undefined) {
    groups.add(pid);
    reply({ id, started: pid });
  }
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
          killGroup(pid);
        }, req.timeoutMs);
  child.stdout.on('data', (d: Buffer) => {
    outLen += d.length;
    if (outLen > req.maxBytes) {
      failure ??= {
        timeout: false,
        message: `${cmd} ${args[0] ?? ''}: more than ${req.maxBytes} bytes of output`,
      };
      killGroup(pid);
      return;
    }
    out.push(d);
  });
  child.stderr.on('data', (d: Buffer) => {
    if (err.length < 64 * 1024) err += d.toString('utf8');
  });
  child.stdin.on('error', () => undefined);
  child.on('error', (e) => {
    clearTimeout(timer);
    if (pid !== undefined) groups.delete(pid);
    reply({ id, ok: false, timeout: false, message: `${cmd}: ${e.message}`, stderr: err });
  });
  child.on('close', (code) => {
    clearTimeout(timer);
    if (pid !== undefined) groups.delete(pid);
    if (failure !== undefined) reply({ id, ok: false, ...failure, stderr: err });
    else reply({ id, ok: true, code: code ?? 1, stdout: Buffer.concat(out), stderr: err });
  });
  child.stdin.end(req.input ?? '');
}

process.on('message', (m) => run(m as Request));
process.on('disconnect', () => end(0));
process.on('uncaughtException', () => end(1));
// A terminal's Ctrl-C or a signal to the server's process group must not end the spawner under a
// server that is still draining: it ends with its IPC channel.
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
