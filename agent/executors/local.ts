import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cloneScript, stepScript, type Executor, type Job, type StepResult, type StepRun } from '../types.ts';

const KILL_GRACE_MS = 2000;

/** Runs `sh -c script` in its own process group; aborting kills the whole group. */
function runShell(
  script: string,
  opts: { cwd: string; env: Record<string, string>; signal: AbortSignal; onOutput: (d: Buffer) => void },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', script], {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', opts.onOutput);
    child.stderr.on('data', opts.onOutput);
    let killTimer: NodeJS.Timeout | undefined;
    const kill = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
      killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }, KILL_GRACE_MS);
    };
    if (opts.signal.aborted) kill();
    opts.signal.addEventListener('abort', kill, { once: true });
    child.on('error', reject);
    child.on('close', (code, sig) => {
      clearTimeout(killTimer);
      opts.signal.removeEventListener('abort', kill);
      resolve(code ?? 128 + (sig === null ? 1 : (os.constants.signals[sig] ?? 1)));
    });
  });
}

/**
 * Runs each step with `sh -c` in a temporary clone of the repository on this host. It runs code
 * from pushed repositories with the agent's privileges: for development and the embedded
 * default, not for untrusted repositories.
 */
export class LocalExecutor implements Executor {
  readonly name = 'local';
  private readonly root: string;
  private readonly workspaces = new Map<number, string>();

  constructor(opts: { workDir?: string } = {}) {
    this.root = opts.workDir ?? os.tmpdir();
  }

  private baseEnv(): Record<string, string> {
    const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'USER'];
    const env: Record<string, string> = {};
    for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
    return env;
  }

  async prepare(job: Job, signal: AbortSignal): Promise<void> {
    await fs.mkdir(this.root, { recursive: true });
    const dir = await fs.mkdtemp(path.join(this.root, `triad-p${job.pipeline_id}-`));
    this.workspaces.set(job.pipeline_id, dir);
    let output = '';
    const code = await runShell(cloneScript(job, path.join(dir, 'src')), {
      cwd: dir,
      env: { ...this.baseEnv(), GIT_TERMINAL_PROMPT: '0', HGPLAIN: '1', USER: process.env.USER ?? 'triad' },
      signal,
      onOutput: (d) => {
        if (output.length < 4000) output += d.toString();
      },
    });
    if (code !== 0)
      throw new Error(
        `cloning ${job.org}/${job.repo} at ${job.commit_node} failed (exit ${code}): ${output.trim()}`,
      );
  }

  async runStep(run: StepRun): Promise<StepResult> {
    const dir = this.workspaces.get(run.job.pipeline_id);
    if (dir === undefined) throw new Error('workspace not prepared');
    const exitCode = await runShell(stepScript(run.step.commands), {
      cwd: path.join(dir, 'src'),
      env: { ...this.baseEnv(), ...run.env },
      signal: run.signal,
      onOutput: run.onOutput,
    });
    return { exitCode };
  }

  async cleanup(job: Job): Promise<void> {
    const dir = this.workspaces.get(job.pipeline_id);
    this.workspaces.delete(job.pipeline_id);
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
  }
}
