import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';

const KILL_GRACE_MS = 2000;
/** After the main process exits, how long its output pipes may stay open (a stray holder). */
const CLOSE_GRACE_MS = 5000;

export type ProcessSpec = {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  uid?: number | undefined;
  gid?: number | undefined;
  /** true: the child is bwrap (its PID namespace dies with it); false: a plain process group. */
  sandboxed: boolean;
  /** Pipes given to the child beyond stdout and stderr, as fds 3, 4, ... (bwrap's --info-fd...). */
  extraFds?: number;
  /**
   * Called once the child is spawned, before its output is awaited; it may use the extra pipes.
   * Its returned function runs after the child exits. A rejection kills the child and makes the
   * run reject with it.
   */
  started?: (child: ChildProcess) => Promise<(() => void) | undefined>;
};

/**
 * Process groups of unsandboxed runs still going. Should this process exit first (an agent or
 * server whose shutdown gave up waiting on a step that ignores SIGTERM), they are killed as it
 * exits rather than left running. A sandbox dies with its parent on its own (`--die-with-parent`).
 */
const liveGroups = new Set<number>();
let killOnExit = false;

function trackGroup(pid: number): void {
  if (!killOnExit) {
    killOnExit = true;
    process.once('exit', () => {
      for (const g of liveGroups) {
        try {
          process.kill(-g, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    });
  }
  liveGroups.add(pid);
}

/** What a caller may learn of a run: the pid of the process it started (bwrap, or `sh`). */
export type RunHooks = { spawned?: (pid: number) => void };

const exitCodeOf = (code: number | null, sig: NodeJS.Signals | null) =>
  code ?? 128 + (sig === null ? 1 : (os.constants.signals[sig] ?? 1));

/**
 * Runs a process in its own process group and resolves with its exit code. Aborting kills it: a
 * sandbox at once (its PID namespace takes every step process with it), a plain process group
 * with SIGTERM then SIGKILL. When the main process ends, whatever it left running ends too.
 */
export function runProcess(
  spec: ProcessSpec,
  signal: AbortSignal,
  onOutput: (d: Buffer) => void,
  hooks: RunHooks = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const extra = Array.from({ length: spec.extraFds ?? 0 }, () => 'pipe' as const);
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', ...extra],
      ...(spec.uid === undefined ? {} : { uid: spec.uid, gid: spec.gid }),
    });
    if (child.pid !== undefined) hooks.spawned?.(child.pid);
    const group = child.pid !== undefined && !spec.sandboxed ? child.pid : undefined;
    if (group !== undefined) trackGroup(group);
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
    const signalGroup = (sig: NodeJS.Signals) => {
      // once it has exited its pid may be another process's; a sandbox has nothing left then
      const gone = child.exitCode !== null || child.signalCode !== null;
      if (child.pid === undefined || (gone && spec.sandboxed)) return;
      try {
        if (spec.sandboxed) process.kill(child.pid, 'SIGKILL');
        else process.kill(-child.pid, sig);
      } catch {
        /* already gone */
      }
    };
    let killTimer: NodeJS.Timeout | undefined;
    const kill = () => {
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS);
    };
    if (signal.aborted) kill();
    signal.addEventListener('abort', kill, { once: true });
    let exitCode: number | undefined;
    let closeTimer: NodeJS.Timeout | undefined;
    let failure: Error | undefined;
    let after: (() => void) | undefined;
    let settled = false;
    const finish = (code: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(killTimer);
      clearTimeout(closeTimer);
      if (group !== undefined) liveGroups.delete(group);
      signal.removeEventListener('abort', kill);
      after?.();
      if (failure !== undefined) reject(failure);
      else resolve(code);
    };
    child.on('error', (e) => {
      failure ??= e;
      finish(1);
    });
    if (spec.started !== undefined) {
      spec.started(child).then(
        (fn) => {
          if (settled) fn?.();
          else after = fn;
        },
        (e: unknown) => {
          failure ??= e instanceof Error ? e : new Error(String(e));
          signalGroup('SIGKILL');
        },
      );
    }
    child.on('exit', (code, sig) => {
      exitCode = exitCodeOf(code, sig);
      // background processes of the step end with it
      if (group !== undefined) {
        try {
          process.kill(-group, 'SIGKILL');
        } catch {
          /* none left */
        }
        liveGroups.delete(group);
      }
      closeTimer = setTimeout(() => {
        for (const s of child.stdio) s?.destroy();
        finish(exitCode!);
      }, CLOSE_GRACE_MS);
    });
    child.on('close', (code, sig) => finish(exitCode ?? exitCodeOf(code, sig)));
  });
}
