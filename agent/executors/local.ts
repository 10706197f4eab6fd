import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cloneScript, stepScript, type Executor, type Job, type StepResult, type StepRun } from '../types.ts';
import { Sandbox, type SandboxOptions } from './sandbox.ts';

const KILL_GRACE_MS = 2000;
/** After the main process exits, how long its output pipes may stay open (a stray holder). */
const CLOSE_GRACE_MS = 5000;

type Spec = {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  uid?: number | undefined;
  gid?: number | undefined;
  /** true: the child is bwrap (its PID namespace dies with it); false: a plain process group. */
  sandboxed: boolean;
};

/**
 * Runs a process in its own process group and resolves with its exit code. Aborting kills it: a
 * sandbox at once (its PID namespace takes every step process with it), a plain process group
 * with SIGTERM then SIGKILL. When the main process ends, whatever it left running ends too.
 */
function runProcess(spec: Spec, signal: AbortSignal, onOutput: (d: Buffer) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(spec.uid === undefined ? {} : { uid: spec.uid, gid: spec.gid }),
    });
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    const signalGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined) return;
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
    const finish = (code: number) => {
      clearTimeout(killTimer);
      clearTimeout(closeTimer);
      signal.removeEventListener('abort', kill);
      resolve(code);
    };
    child.on('error', (e) => {
      clearTimeout(killTimer);
      signal.removeEventListener('abort', kill);
      reject(e);
    });
    child.on('exit', (code, sig) => {
      exitCode = code ?? 128 + (sig === null ? 1 : (os.constants.signals[sig] ?? 1));
      // background processes of the step end with it
      if (!spec.sandboxed && child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          /* none left */
        }
      }
      closeTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(exitCode!);
      }, CLOSE_GRACE_MS);
    });
    child.on('close', (code, sig) => {
      finish(exitCode ?? code ?? 128 + (sig === null ? 1 : (os.constants.signals[sig] ?? 1)));
    });
  });
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await fs.lchown(dir, uid, gid);
  const entries = await fs.readdir(dir, { recursive: true });
  for (const e of entries) await fs.lchown(path.join(dir, e), uid, gid);
}

/** Removes a workspace even when a step left directories without write permission in it. */
async function removeTree(dir: string): Promise<void> {
  try {
    await fs.rm(dir, { recursive: true, force: true });
  } catch {
    await new Promise<void>((resolve) => {
      const c = spawn('chmod', ['-R', 'u+rwX', dir], { stdio: 'ignore' });
      c.on('close', () => resolve());
      c.on('error', () => resolve());
    });
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Can `id` reach (traverse into) `dir`: every directory from / down to it lets it search? */
async function reachable(dir: string, id: { uid: number; gid: number }): Promise<boolean> {
  for (let d = dir; ; d = path.dirname(d)) {
    const st = await fs.stat(d);
    const bits = st.uid === id.uid ? 0o100 : st.gid === id.gid ? 0o010 : 0o001;
    if ((st.mode & bits) === 0) return false;
    if (d === path.dirname(d)) return true;
  }
}

/**
 * The shared fallback root for workspaces when the configured one is hidden from the sandbox
 * user (e.g. under /root): a root-owned directory in the temp directory, checked against a
 * directory planted there by someone else.
 */
async function fallbackRoot(): Promise<string> {
  const dir = path.join(os.tmpdir(), 'triad-ci-work');
  await fs.mkdir(dir, { mode: 0o711 }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
  const st = await fs.lstat(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(`${dir} exists but is not a root-owned directory that only root may write`);
  }
  await fs.chmod(dir, 0o711);
  return dir;
}

export type LocalExecutorOptions = {
  /** Where workspaces are created (default: the OS temp directory). */
  workDir?: string;
  sandbox?: Partial<SandboxOptions>;
  /**
   * Run steps with plain `sh -c` as the agent's user, with no isolation at all: any pipeline can
   * then read everything the agent can. Only for trusted repositories on a machine without bwrap.
   */
  unsandboxed?: boolean;
};

/**
 * Runs each step on this host in a workspace holding a clone of the repository. By default every
 * step runs in a bubblewrap sandbox (see sandbox.ts) as an unprivileged user; the clone itself
 * runs before, outside the sandbox, and the workspace is then handed to the sandbox user.
 */
export class LocalExecutor implements Executor {
  readonly name = 'local';
  readonly sandbox: Sandbox | undefined;
  private readonly configuredRoot: string;
  private rootReady: Promise<string> | undefined;
  private readonly workspaces = new Map<number, string>();

  constructor(opts: LocalExecutorOptions = {}) {
    this.configuredRoot = path.resolve(opts.workDir ?? os.tmpdir());
    this.sandbox = opts.unsandboxed === true ? undefined : new Sandbox(opts.sandbox);
  }

  /**
   * Where workspaces go: the configured directory, unless the agent runs as root and the
   * sandbox user cannot reach it (bwrap, running as that user, must find the workspace); then
   * a root-owned `triad-ci-work` directory in the temp directory.
   */
  root(): Promise<string> {
    this.rootReady ??= (async () => {
      await fs.mkdir(this.configuredRoot, { recursive: true });
      if (this.sandbox?.changesUser !== true) return this.configuredRoot;
      if (await reachable(this.configuredRoot, await this.sandbox.identity())) return this.configuredRoot;
      return fallbackRoot();
    })();
    this.rootReady.catch(() => (this.rootReady = undefined));
    return this.rootReady;
  }

  private baseEnv(): Record<string, string> {
    const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'USER'];
    const env: Record<string, string> = {};
    for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
    return env;
  }

  /** A fresh, empty workspace (`src/` for the checkout, `home/` for $HOME) owned by the step user. */
  private async newWorkspace(prefix: string): Promise<string> {
    const dir = await fs.mkdtemp(path.join(await this.root(), `triad-${process.pid}-${prefix}-`));
    await fs.mkdir(path.join(dir, 'home'));
    return dir;
  }

  private async handOver(dir: string): Promise<void> {
    if (this.sandbox?.changesUser !== true) return;
    const id = await this.sandbox.identity();
    await chownTree(dir, id.uid, id.gid);
  }

  /**
   * Checks that steps can run isolated here by running one in a throw-away workspace; throws
   * with the reason (bwrap missing, user namespaces refused, the sandbox user cannot be
   * created...). Without a sandbox (opted out) there is nothing to check.
   */
  async probe(): Promise<void> {
    if (this.sandbox === undefined) return;
    await this.sandbox.identity();
    const dir = await this.newWorkspace('probe');
    try {
      await fs.mkdir(path.join(dir, 'src'));
      await this.handOver(dir);
      let out = '';
      const code = await this.exec(
        dir,
        'echo sandbox > marker && cat marker && id -u',
        {},
        new AbortController().signal,
        (d) => (out += d.toString()),
      );
      const uid = (await this.sandbox.identity()).uid;
      if (code !== 0 || out.trim() !== `sandbox\n${uid}`) {
        throw new Error(`a test run of the sandbox failed (exit ${code}): ${out.trim().slice(0, 2000)}`);
      }
    } finally {
      await removeTree(dir);
    }
  }

  private async exec(
    dir: string,
    script: string,
    env: Record<string, string>,
    signal: AbortSignal,
    onOutput: (d: Buffer) => void,
  ): Promise<number> {
    if (this.sandbox === undefined) {
      return runProcess(
        {
          file: 'sh',
          args: ['-c', script],
          cwd: path.join(dir, 'src'),
          env: { ...this.baseEnv(), HOME: path.join(dir, 'home'), ...env },
          sandboxed: false,
        },
        signal,
        onOutput,
      );
    }
    const spec = await this.sandbox.spawnSpec(dir, script, env);
    return runProcess({ ...spec, cwd: '/', sandboxed: true }, signal, onOutput);
  }

  async prepare(job: Job, signal: AbortSignal): Promise<void> {
    if (this.sandbox !== undefined) await this.sandbox.identity();
    const dir = await this.newWorkspace(`p${job.pipeline_id}`);
    this.workspaces.set(job.pipeline_id, dir);
    let output = '';
    const code = await runProcess(
      {
        file: 'sh',
        args: ['-c', cloneScript(job, path.join(dir, 'src'))],
        cwd: dir,
        env: { ...this.baseEnv(), GIT_TERMINAL_PROMPT: '0', HGPLAIN: '1', USER: process.env.USER ?? 'triad' },
        sandboxed: false,
      },
      signal,
      (d) => {
        if (output.length < 4000) output += d.toString();
      },
    );
    if (code !== 0)
      throw new Error(
        `cloning ${job.org}/${job.repo} at ${job.commit_node} failed (exit ${code}): ${output.trim()}`,
      );
    await this.handOver(dir);
  }

  async runStep(run: StepRun): Promise<StepResult> {
    const dir = this.workspaces.get(run.job.pipeline_id);
    if (dir === undefined) throw new Error('workspace not prepared');
    const exitCode = await this.exec(dir, stepScript(run.step.commands), run.env, run.signal, run.onOutput);
    return { exitCode };
  }

  async cleanup(job: Job): Promise<void> {
    const dir = this.workspaces.get(job.pipeline_id);
    this.workspaces.delete(job.pipeline_id);
    if (dir !== undefined) await removeTree(dir);
  }

  /** Removes workspaces left by agent processes that are gone (killed before their cleanup). */
  async sweep(active: ReadonlySet<number>): Promise<void> {
    const root = await this.root().catch(() => undefined);
    if (root === undefined) return;
    const names = await fs.readdir(root).catch(() => [] as string[]);
    for (const name of names) {
      const m = /^triad-(\d+)-(?:p(\d+)|probe)-[A-Za-z0-9]{6}$/.exec(name);
      if (m === null) continue;
      const pid = Number(m[1]);
      const mine = pid === process.pid;
      if (mine && (m[2] === undefined || active.has(Number(m[2])))) continue;
      if (!mine && alive(pid)) continue;
      await removeTree(path.join(root, name)).catch(() => undefined);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
