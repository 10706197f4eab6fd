/**
 * Child processes of the test control plane: started with their output in a log file, stopped
 * with SIGTERM then SIGKILL after a grace, and recorded in a pid file so that a later run can stop
 * what a killed run left behind (only processes whose executable is the recorded binary).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const STATE_PREFIX = 'triad-k8s-';
const PIDS_FILE = 'pids.json';

type PidFile = { owner: number; procs: { name: string; pid: number; bin: string }[] };

export type Proc = {
  name: string;
  child: ChildProcess;
  logFile: string;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  exitCode: () => number | null | undefined;
};

export function tail(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

function recordPids(dir: string, procs: readonly Proc[], bins: Map<string, string>): void {
  const data: PidFile = {
    owner: process.pid,
    procs: procs
      .filter((p) => p.child.pid !== undefined)
      .map((p) => ({ name: p.name, pid: p.child.pid!, bin: bins.get(p.name) ?? '' })),
  };
  fs.writeFileSync(path.join(dir, PIDS_FILE), JSON.stringify(data));
}

/** The processes of one control plane, in start order. */
export class ProcessGroup {
  readonly procs: Proc[] = [];
  private readonly bins = new Map<string, string>();
  readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  start(name: string, bin: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
    const logFile = path.join(this.dir, `${name}.log`);
    const fd = fs.openSync(logFile, 'a');
    const child = spawn(bin, args, {
      stdio: ['ignore', fd, fd],
      env: { ...process.env, ...env },
      cwd: this.dir,
    });
    fs.closeSync(fd);
    let code: number | null | undefined;
    const exited = new Promise<void>((resolve) => {
      child.once('exit', (c, signal) => {
        code = c ?? (signal === null ? null : -1);
        resolve();
      });
      child.once('error', (err) => {
        fs.appendFileSync(logFile, `\n[harness] cannot start ${bin}: ${err.message}\n`);
        code = -1;
        resolve();
      });
    });
    const proc: Proc = { name, child, logFile, exited, exitCode: () => code };
    this.procs.push(proc);
    this.bins.set(name, bin);
    recordPids(this.dir, this.procs, this.bins);
    return proc;
  }

  /** Stops the processes in reverse start order: SIGTERM, then SIGKILL after `graceMs`. */
  async stopAll(graceMs: (name: string) => number = () => 5000): Promise<void> {
    for (const p of [...this.procs].reverse()) await stopProc(p, graceMs(p.name));
    this.procs.length = 0;
    fs.rmSync(path.join(this.dir, PIDS_FILE), { force: true });
  }
}

async function stopProc(p: Proc, graceMs: number): Promise<void> {
  if (p.exitCode() !== undefined || p.child.pid === undefined) return;
  p.child.kill('SIGTERM');
  const timer = new Promise<boolean>((r) => setTimeout(() => r(false), graceMs));
  const done = await Promise.race([p.exited.then(() => true), timer]);
  if (!done) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
}

function exeOf(pid: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Removes state directories of earlier runs whose owner (the jest process) is gone, first killing
 * the control-plane processes they recorded (checked by executable path, so a recycled pid of an
 * unrelated process is left alone).
 */
export function reapStale(root = os.tmpdir()): string[] {
  const reaped: string[] = [];
  let entries: string[];
  try {
    entries = fs.readdirSync(root).filter((e) => e.startsWith(STATE_PREFIX));
  } catch {
    return reaped;
  }
  for (const e of entries) {
    const dir = path.join(root, e);
    let data: PidFile | undefined;
    try {
      data = JSON.parse(fs.readFileSync(path.join(dir, PIDS_FILE), 'utf8')) as PidFile;
    } catch {
      continue; // no pid file: stopped cleanly (or not ours); the directory is removed by its owner
    }
    if (alive(data.owner)) continue;
    for (const p of data.procs) {
      const exe = exeOf(p.pid);
      if (exe !== undefined && p.bin !== '' && path.resolve(exe) === path.resolve(p.bin)) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
    fs.rmSync(dir, { recursive: true, force: true });
    reaped.push(dir);
  }
  return reaped;
}
