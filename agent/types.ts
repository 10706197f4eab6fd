/** The job an agent receives from `POST /api/v1/ci/poll` (the spec's agent job plus Triad's extensions). */
export type JobStep = {
  id: number;
  number: number;
  name: string;
  image: string;
  commands: string[];
  environment: Record<string, string>;
  status: string;
  /** The step is stopped (status failure) after this many seconds; absent from older servers. */
  timeout_seconds?: number;
};

export type Job = {
  pipeline_id: number;
  number: number;
  commit_node: string;
  branch: string;
  tag: string;
  event: string;
  events: string[];
  clone_url: string;
  /** Short-lived token for cloning a private repository (HTTP Basic password); null for none. */
  clone_token: string | null;
  vcs: 'git' | 'hg' | 'fossil';
  org: string;
  repo: string;
  steps: JobStep[];
  ci_env: Record<string, string>;
  /** Most bytes one step log may hold on the server (the agent keeps the head and the tail). */
  log_max_bytes?: number;
};

export type StepResult = {
  exitCode: number;
  /** Why the step failed without running its commands to the end (OOMKilled, ImagePullBackOff, ...). */
  reason?: string;
};

export type StepRun = {
  job: Job;
  step: JobStep;
  /** step.environment + job.ci_env (ci_env wins). */
  env: Record<string, string>;
  /** Called with the step's output (stdout and stderr interleaved) as it is produced. */
  onOutput: (data: Buffer) => void;
  /** Aborted when the pipeline is cancelled or the agent gives up on it. */
  signal: AbortSignal;
};

/** Runs the steps of a pipeline somewhere: on this host (`local`) or as Kubernetes pods. */
export interface Executor {
  readonly name: string;
  /** Before the first step: make the workspace holding the repository at the commit. */
  prepare(job: Job, signal: AbortSignal): Promise<void>;
  runStep(run: StepRun): Promise<StepResult>;
  /** After the last step (also after failures and cancellation): remove what prepare/runStep made. */
  cleanup(job: Job): Promise<void>;
  /** At agent start and periodically: remove leftovers of pipelines that are no longer running here. */
  sweep?(activePipelineIds: ReadonlySet<number>): Promise<void>;
}

/**
 * A step's commands as one `sh -c` script, the same for every executor: it stops at the first
 * failing command (`set -e`) with that command's exit code. The log holds only what the commands
 * print (commands are not echoed), so `echo hello` logs exactly `hello`.
 */
export function stepScript(commands: readonly string[]): string {
  return ['set -e', ...commands].join('\n');
}

/** Clone commands for a job, shared by the executors (credentials in the URL or via -B for fossil). */
export function cloneScript(job: Job, dest: string): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const url = new URL(job.clone_url);
  if (job.clone_token !== null && job.vcs !== 'fossil') {
    url.username = 'ci';
    url.password = job.clone_token;
  }
  const u = q(url.toString());
  const rev = q(job.commit_node);
  const d = q(dest);
  switch (job.vcs) {
    case 'git':
      // the credential is not left in .git/config, where step commands could read it
      return `git clone -q --no-checkout ${u} ${d} && git -C ${d} remote set-url origin ${q(job.clone_url)} && git -C ${d} checkout -q ${rev}`;
    case 'hg':
      return `hg clone -q -U ${u} ${d} && hg -R ${d} update -q -r ${rev}`;
    case 'fossil': {
      const auth = job.clone_token === null ? '' : `-B ${q(`ci:${job.clone_token}`)} `;
      const file = q(`${dest}.fossil`);
      return `fossil clone ${auth}${u} ${file} >/dev/null && mkdir -p ${d} && cd ${d} && fossil open -f ${file} ${rev} >/dev/null`;
    }
  }
}
