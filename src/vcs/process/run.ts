import fs from 'node:fs/promises';
import path from 'node:path';
import { spawnRun } from './spawner.ts';
import { inSpan, SpanKind, tracingOn } from '../../telemetry/spans.ts';

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
 * is thrown. Arguments are passed as a vector, never through a shell. The command is started by
 * the spawner (spawner.ts), so the server process does not fork.
 */
export function runCommand(cmd: string, args: readonly string[], opts: RunOptions): Promise<RunResult> {
  return execute(cmd, args, opts);
}

/** `runCommand` where the time limit may be absent (none). */
export async function execute(
  cmd: string,
  args: readonly string[],
  opts: Omit<RunOptions, 'timeoutMs'> & { timeoutMs?: number },
): Promise<RunResult> {
  if (!tracingOn()) return run(cmd, args, opts);
  const { kind, operation } = commandName(cmd, args);
  return inSpan(
    `${kind} ${operation}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: { 'vcs.kind': kind, 'vcs.operation': operation, 'process.executable.name': kind },
    },
    async (span) => {
      const r = await run(cmd, args, opts);
      span.setAttribute('process.exit.code', r.code);
      return r;
    },
  );
}

/** Commands' options that take the next argument as their value (so it is not the subcommand). */
const VALUED = new Set(['-C', '-c', '-R', '--repository', '--cwd', '--config', '--git-dir', '--work-tree']);

/**
 * What a span calls a command: the program's name and its subcommand (`git for-each-ref`,
 * `hg log`, `fossil sql`), options and their values skipped.
 */
export function commandName(cmd: string, args: readonly string[]): { kind: string; operation: string } {
  const kind = path.basename(cmd);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (VALUED.has(a)) i += 1;
    else if (!a.startsWith('-')) return { kind, operation: a };
  }
  return { kind, operation: 'run' };
}

async function run(
  cmd: string,
  args: readonly string[],
  opts: Omit<RunOptions, 'timeoutMs'> & { timeoutMs?: number },
): Promise<RunResult> {
  const r = await spawnRun(cmd, args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    input: opts.input,
    timeoutMs: opts.timeoutMs,
    maxBytes: opts.maxBytes ?? 64 * 1024 * 1024,
  });
  if (r.ok) return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  throw r.timeout
    ? new VcsTimeout(r.message, null, r.stderr)
    : new VcsCommandFailed(r.message, null, r.stderr);
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
