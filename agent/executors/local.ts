import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cloneScript, stepScript, type Executor, type Job, type StepResult, type StepRun } from '../types.ts';
import { formatBytes, watchDisk } from './disk-watch.ts';
import { runProcess } from './process.ts';
import { Sandbox, WORKSPACE, type SandboxOptions, type SandboxNetwork } from './sandbox.ts';

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
 * The shared root for workspaces of an agent running as root: a root-owned directory that only
 * root may write, checked against a directory planted there by someone else. It is in /var/tmp
 * (on disk, unlike a /tmp that may be memory) and its path is what a step sees of the host in
 * /proc/self/mountinfo, so it says nothing about the server's data directory.
 */
async function sharedRoot(): Promise<string> {
  const base = (await fs.stat('/var/tmp').catch(() => undefined))?.isDirectory() ? '/var/tmp' : os.tmpdir();
  const dir = path.join(base, 'triad-ci-work');
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
  /**
   * Where workspaces are created. Default: for an agent running as root, `/var/tmp/triad-ci-work`;
   * otherwise the OS temp directory. Steps see this path in their mount table.
   */
  workDir?: string;
  sandbox?: Partial<SandboxOptions>;
  /**
   * Run steps with plain `sh -c` as the agent's user, with no isolation at all: any pipeline can
   * then read everything the agent can. Only for trusted repositories on a machine without bwrap.
   */
  unsandboxed?: boolean;
  /** How often a running step's workspace is measured against the job's disk limit. */
  diskCheckMs?: number;
};

/**
 * Runs each step on this host in a workspace holding a clone of the repository. By default the
 * clone and every step run in a bubblewrap sandbox (see sandbox.ts) as an unprivileged user: the
 * agent itself never reads what was pushed, so nothing in the pushed tree (symbolic links,
 * subrepositories, hooks) can make a privileged process touch a path outside the workspace.
 */
export class LocalExecutor implements Executor {
  readonly name = 'local';
  readonly sandbox: Sandbox | undefined;
  private readonly configuredRoot: string | undefined;
  private readonly diskCheckMs: number;
  private rootReady: Promise<string> | undefined;
  private readonly workspaces = new Map<number, string>();

  constructor(opts: LocalExecutorOptions = {}) {
    this.configuredRoot = opts.workDir === undefined ? undefined : path.resolve(opts.workDir);
    this.sandbox = opts.unsandboxed === true ? undefined : new Sandbox(opts.sandbox);
    this.diskCheckMs = opts.diskCheckMs ?? 5000;
  }

  /**
   * Where workspaces go: the configured directory, unless the agent runs as root and the
   * sandbox user cannot reach it (bwrap, running as that user, must find the workspace); then
   * the shared root-owned directory.
   */
  root(): Promise<string> {
    this.rootReady ??= (async () => {
      const sandbox = this.sandbox?.changesUser === true ? this.sandbox : undefined;
      const configured = this.configuredRoot;
      if (configured === undefined) return sandbox !== undefined ? sharedRoot() : os.tmpdir();
      await fs.mkdir(configured, { recursive: true });
      if (sandbox === undefined) return configured;
      if (await reachable(configured, await sandbox.identity())) return configured;
      return sharedRoot();
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

  /**
   * A fresh, empty workspace (`home/` for $HOME; the clone makes `src/`) owned by the step user:
   * the agent changes the owner of the two directories it just made, nothing else.
   */
  private async newWorkspace(prefix: string): Promise<string> {
    const dir = await fs.mkdtemp(path.join(await this.root(), `triad-${process.pid}-${prefix}-`));
    await fs.mkdir(path.join(dir, 'home'));
    if (this.sandbox?.changesUser === true) {
      const id = await this.sandbox.identity();
      for (const d of [dir, path.join(dir, 'home')]) await fs.lchown(d, id.uid, id.gid);
    }
    return dir;
  }

  /**
   * Checks that steps can run isolated here by running one in a throw-away workspace, on the
   * steps' network; throws with the reason (bwrap or slirp4netns missing, user namespaces
   * refused, the sandbox user cannot be created...). Without a sandbox there is nothing to check.
   */
  async probe(): Promise<void> {
    if (this.sandbox === undefined) return;
    await this.sandbox.identity();
    const dir = await this.newWorkspace('probe');
    try {
      let out = '';
      const code = await this.exec(
        dir,
        'echo sandbox > marker && cat marker && id -u',
        {},
        this.sandbox.o.network,
        new AbortController().signal,
        (d) => (out += d.toString()),
        WORKSPACE,
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
    network: SandboxNetwork,
    signal: AbortSignal,
    onOutput: (d: Buffer) => void,
    cwd = `${WORKSPACE}/src`,
  ): Promise<number> {
    if (this.sandbox === undefined) {
      const hostCwd = path.join(dir, path.relative(WORKSPACE, cwd));
      return runProcess(
        {
          file: 'sh',
          args: ['-c', script],
          cwd: hostCwd,
          env: { ...this.baseEnv(), HOME: path.join(dir, 'home'), ...env },
          sandboxed: false,
        },
        signal,
        onOutput,
      );
    }
    const spec = await this.sandbox.spec(dir, script, env, network, { cwd });
    return runProcess(spec, signal, onOutput);
  }

  /**
   * Clones the repository at the commit into the workspace's `src/`: in the sandbox, as the step
   * user, on the host's network (the server may be on loopback), with the system's VCS
   * configuration ignored and subrepositories not followed (see `cloneScript`).
   */
  async prepare(job: Job, signal: AbortSignal): Promise<void> {
    if (this.sandbox !== undefined) await this.sandbox.identity();
    const dir = await this.newWorkspace(`p${job.pipeline_id}`);
    this.workspaces.set(job.pipeline_id, dir);
    let output = '';
    const sandboxed = this.sandbox !== undefined;
    const dest = sandboxed ? `${WORKSPACE}/src` : path.join(dir, 'src');
    const code = await this.exec(
      dir,
      cloneScript(job, dest),
      sandboxed ? {} : { USER: process.env.USER ?? 'triad' },
      'host',
      signal,
      (d) => {
        if (output.length < 4000) output += d.toString();
      },
      WORKSPACE,
    );
    if (code !== 0)
      throw new Error(
        `cloning ${job.org}/${job.repo} at ${job.commit_node} failed (exit ${code}): ${output.trim()}`,
      );
  }

  async runStep(run: StepRun): Promise<StepResult> {
    const dir = this.workspaces.get(run.job.pipeline_id);
    if (dir === undefined) throw new Error('workspace not prepared');
    const max = run.job.disk_max_bytes;
    const abort = new AbortController();
    const stop = () => abort.abort();
    run.signal.addEventListener('abort', stop, { once: true });
    if (run.signal.aborted) abort.abort();
    let over: number | undefined;
    const unwatch =
      max === undefined
        ? () => undefined
        : watchDisk(
            dir,
            max,
            (bytes) => {
              over = bytes;
              abort.abort();
            },
            this.diskCheckMs,
          );
    try {
      const network = this.sandbox?.o.network ?? 'outbound';
      const exitCode = await this.exec(
        dir,
        stepScript(run.step.commands),
        run.env,
        network,
        abort.signal,
        run.onOutput,
      );
      if (over !== undefined && max !== undefined && !run.signal.aborted) {
        return {
          exitCode,
          reason: `the workspace took ${formatBytes(over)}, more than the limit of ${formatBytes(max)}: step stopped`,
        };
      }
      return { exitCode };
    } finally {
      unwatch();
      run.signal.removeEventListener('abort', stop);
    }
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
