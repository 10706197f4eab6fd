import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';

/** A VCS command that could not do its work (non-zero exit, killed, not startable). */
export class VcsCommandFailed extends Error {
  readonly code: number | null;
  readonly stderr: string;
  constructor(message: string, code: number | null, stderr: string) {
    super(message);
    this.code = code;
    this.stderr = stderr;
  }
}

/** A VCS command that ran past its time limit; its whole process group was killed. */
export class VcsTimeout extends VcsCommandFailed {}

export type RunOptions = {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Written to stdin, which is then closed (stdin is empty otherwise). */
  input?: string | Buffer;
  /** Milliseconds before the process group is killed (SIGKILL). */
  timeoutMs: number;
  /** Largest stdout kept; the process is killed beyond it. Default 64 MiB. */
  maxBytes?: number;
};

export type RunResult = { code: number; stdout: Buffer; stderr: string };

/**
 * Runs one command in its own process group (so a hook or helper it starts dies with it) and
 * answers its exit code and output; a non-zero exit is not an error here. On timeout, on too much
 * output or when it cannot start, the whole group is killed and `VcsCommandFailed` (`VcsTimeout`)
 * is thrown. Arguments are passed as a vector, never through a shell.
 */
export function runCommand(cmd: string, args: readonly string[], opts: RunOptions): Promise<RunResult> {
  const max = opts.maxBytes ?? 64 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let outLen = 0;
    let err = '';
    let failure: VcsCommandFailed | undefined;
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      failure = new VcsTimeout(`${cmd} ${args[0] ?? ''}: timed out after ${opts.timeoutMs} ms`, null, err);
      killGroup();
    }, opts.timeoutMs);
    child.stdout.on('data', (d: Buffer) => {
      outLen += d.length;
      if (outLen > max) {
        failure ??= new VcsCommandFailed(
          `${cmd} ${args[0] ?? ''}: more than ${max} bytes of output`,
          null,
          err,
        );
        killGroup();
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
      reject(new VcsCommandFailed(`${cmd}: ${e.message}`, null, err));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (failure !== undefined) reject(failure);
      else resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr: err });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** `runCommand` that throws `VcsCommandFailed` unless the exit code is one of `ok` (default 0). */
export async function runChecked(
  cmd: string,
  args: readonly string[],
  opts: RunOptions & { ok?: readonly number[] },
): Promise<RunResult> {
  const r = await runCommand(cmd, args, opts);
  if (!(opts.ok ?? [0]).includes(r.code)) {
    const what = `${path.basename(cmd)} ${args.find((a) => !a.startsWith('-')) ?? ''}`.trim();
    throw new VcsCommandFailed(
      `${what} failed (exit ${r.code}): ${r.stderr.trim().slice(0, 500)}`,
      r.code,
      r.stderr,
    );
  }
  return r;
}

/**
 * Runs `fn` with a fresh directory under `parent` (created if missing) and removes the directory
 * afterwards, whatever `fn` does (returns, throws, times out).
 */
export async function withTempDir<T>(
  parent: string,
  prefix: string,
  fn: (dir: string) => Promise<T>,
): Promise<T> {
  await fs.mkdir(parent, { recursive: true });
  const dir = await fs.mkdtemp(path.join(parent, prefix));
  try {
    return await fn(dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}
