import path from 'node:path';
import { cloneScript, stepScript, type Executor, type Job, type StepResult, type StepRun } from '../types.ts';
import { diskUsage, formatBytes, watchDisk } from './disk-watch.ts';
import { runProcess, type RunHooks } from './process.ts';
import { Sandbox, WORKSPACE, type SandboxOptions, type SandboxNetwork } from './sandbox.ts';
import { Workspaces } from './workspaces.ts';
import { parseQuantity } from '../../src/pipelines/quantity.ts';

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
  private readonly diskCheckMs: number;
  private readonly spaces: Workspaces;
  private readonly workspaces = new Map<number, string>();

  constructor(opts: LocalExecutorOptions = {}) {
    this.sandbox = opts.unsandboxed === true ? undefined : new Sandbox(opts.sandbox);
    this.spaces = new Workspaces(this.sandbox, opts.workDir);
    this.diskCheckMs = opts.diskCheckMs ?? 5000;
  }

  /** Where workspaces go (see `Workspaces.root`). */
  root(): Promise<string> {
    return this.spaces.root();
  }

  private baseEnv(): Record<string, string> {
    const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'USER'];
    const env: Record<string, string> = {};
    for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
    return env;
  }

  /**
   * Checks that steps can run isolated here by running one in a throw-away workspace, on the
   * steps' network; throws with the reason (bwrap or slirp4netns missing, user namespaces
   * refused, the sandbox user cannot be created...). Without a sandbox there is nothing to check.
   */
  async probe(): Promise<void> {
    if (this.sandbox === undefined) return;
    await this.sandbox.identity();
    const dir = await this.spaces.create('probe');
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
      await this.spaces.remove(dir);
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
    hooks: RunHooks = {},
    memoryBytes?: number,
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
        hooks,
      );
    }
    const spec = await this.sandbox.spec(dir, script, env, network, { cwd, memoryBytes });
    return runProcess(spec, signal, onOutput, hooks);
  }

  /**
   * Runs in the workspace with its size watched against `max` (the job's disk limit): beyond
   * it, or when it cannot be measured, the run is stopped and `reason` says why (`what` ends).
   */
  private async watched(
    dir: string,
    max: number | undefined,
    what: string,
    signal: AbortSignal,
    run: (signal: AbortSignal, hooks: RunHooks) => Promise<number>,
  ): Promise<{ code: number; reason?: string }> {
    const abort = new AbortController();
    const stop = () => abort.abort();
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) abort.abort();
    let pid: number | undefined;
    let reason: string | undefined;
    const exceeded = (bytes: number | undefined, limit: number) => {
      reason =
        bytes === undefined
          ? `the workspace could not be measured against its disk limit: ${what} stopped`
          : `the workspace took ${formatBytes(bytes)}, more than the limit of ${formatBytes(limit)}: ${what} stopped`;
      abort.abort();
    };
    const unwatch =
      max === undefined
        ? () => undefined
        : watchDisk(
            dir,
            max,
            (bytes) => exceeded(bytes, max),
            this.diskCheckMs,
            () => pid,
          );
    try {
      const code = await run(abort.signal, { spawned: (p) => (pid = p) });
      unwatch();
      // once more at the end: a run shorter than the interval is measured too
      if (max !== undefined && reason === undefined && !signal.aborted) {
        const used = await diskUsage(dir);
        if (used === undefined || used > max) exceeded(used, max);
      }
      return reason !== undefined && !signal.aborted ? { code, reason } : { code };
    } finally {
      unwatch();
      signal.removeEventListener('abort', stop);
    }
  }

  /**
   * Clones the repository at the commit into the workspace's `src/`: in the sandbox, as the step
   * user, on the host's network (the server may be on loopback), with the system's VCS
   * configuration ignored and subrepositories not followed (see `cloneScript`).
   */
  async prepare(job: Job, signal: AbortSignal): Promise<void> {
    if (this.sandbox !== undefined) await this.sandbox.identity();
    const dir = await this.spaces.create(`p${job.pipeline_id}`);
    this.workspaces.set(job.pipeline_id, dir);
    let output = '';
    const sandboxed = this.sandbox !== undefined;
    const dest = sandboxed ? `${WORKSPACE}/src` : path.join(dir, 'src');
    const { code, reason } = await this.watched(dir, job.disk_max_bytes, 'clone', signal, (s, hooks) =>
      this.exec(
        dir,
        cloneScript(job, dest),
        sandboxed ? {} : { USER: process.env.USER ?? 'triad' },
        'host',
        s,
        (d) => {
          if (output.length < 4000) output += d.toString();
        },
        WORKSPACE,
        hooks,
      ),
    );
    if (reason !== undefined) throw new Error(`cloning ${job.org}/${job.repo}: ${reason}`);
    if (code !== 0)
      throw new Error(
        `cloning ${job.org}/${job.repo} at ${job.commit_node} failed (exit ${code}): ${output.trim()}`,
      );
  }

  async runStep(run: StepRun): Promise<StepResult> {
    const dir = this.workspaces.get(run.job.pipeline_id);
    if (dir === undefined) throw new Error('workspace not prepared');
    const network = this.sandbox?.o.network ?? 'outbound';
    const script = stepScript(run.step.commands);
    // the step's memory as its address-space limit (RLIMIT_AS), as TRIAD_AGENT_SANDBOX_MEMORY is
    const asked = run.step.resources?.memory;
    const memory = asked === undefined ? undefined : parseQuantity(asked);
    const { code, reason } = await this.watched(
      dir,
      run.job.disk_max_bytes,
      'step',
      run.signal,
      (signal, hooks) =>
        this.exec(dir, script, run.env, network, signal, run.onOutput, undefined, hooks, memory),
    );
    return reason === undefined ? { exitCode: code } : { exitCode: code, reason };
  }

  async cleanup(job: Job): Promise<void> {
    const dir = this.workspaces.get(job.pipeline_id);
    this.workspaces.delete(job.pipeline_id);
    if (dir !== undefined) await this.spaces.remove(dir);
  }

  /** Removes workspaces left by agent processes that are gone (killed before their cleanup). */
  sweep(active: ReadonlySet<number>): Promise<void> {
    return this.spaces.sweep(active);
  }
}
