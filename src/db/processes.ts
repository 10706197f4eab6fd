import fs from 'node:fs/promises';
import path from 'node:path';

/** Whether a process with this id exists (EPERM counts: it exists, owned by someone else). */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Polls until the process is gone; true if it went within `ms`. */
export async function waitGone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!processAlive(pid) || (await procState(pid)) === 'Z') return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !processAlive(pid);
}

/** Fields of /proc/PID/stat after the command name (Linux), or undefined. */
async function procStat(pid: number): Promise<string[] | undefined> {
  const text = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

async function procState(pid: number): Promise<string | undefined> {
  return (await procStat(pid))?.[0];
}

/** The parent process id (Linux), or undefined. */
export async function parentPid(pid: number): Promise<number | undefined> {
  const f = await procStat(pid);
  return f === undefined ? undefined : Number(f[1]);
}

/** The process's start time in clock ticks since boot (Linux): with the pid, a process identity. */
export async function processStartTime(pid: number): Promise<string | undefined> {
  return (await procStat(pid))?.[19];
}

/** The program a process runs (basename of /proc/PID/exe or argv[0]), or undefined. */
export async function processProgram(pid: number): Promise<string | undefined> {
  const exe = await fs.readlink(`/proc/${pid}/exe`).catch(() => undefined);
  if (exe !== undefined) return path.basename(exe.replace(/ \(deleted\)$/, ''));
  const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  return cmd === undefined ? undefined : path.basename(cmd.split('\0')[0] ?? '');
}

export type PostmasterInfo = { pid: number; dir: string; port: number; status: string };

/** The cluster's postmaster.pid: pid, data directory, port and status (`ready` once up). */
export async function readPostmasterPid(dir: string): Promise<PostmasterInfo | undefined> {
  const text = await fs.readFile(path.join(dir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const lines = text.split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return {
    pid,
    dir: lines[1] ?? '',
    port: Number.parseInt(lines[3] ?? '', 10),
    status: (lines[7] ?? '').trim(),
  };
}
