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
  /** Requests and limits the step asks for (Kubernetes quantities); absent when none. */
  resources?: { cpu?: string; memory?: string };
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
  /** The whole pipeline is stopped (status failure) after this many seconds from its claim. */
  pipeline_timeout_seconds?: number;
  /** Most bytes the workspace may take while a step runs (the local executor stops the step). */
  disk_max_bytes?: number;
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

/**
 * A Mercurial extension for the clone's checkout: every commit's subrepository list reads as
 * empty, so `hg update` writes the commit's own files and fetches nothing a `.hgsub` names (a
 * local path of the host, or any URL).
 */
const HG_NO_SUBREPOS = [
  'from mercurial import extensions, subrepoutil',
  'def uisetup(ui):',
  "    extensions.wrapfunction(subrepoutil, 'state', lambda orig, ctx, ui: {})",
].join('\n');

/**
 * Clone commands for a job, shared by the executors: the repository at the commit in `dest`,
 * fetched from the job's clone URL only. Nothing of the pushed tree steers them: the system's and
 * the user's VCS configuration are ignored (no filters, hooks or extensions configured there),
 * Git submodules are not fetched, Mercurial subrepositories are not followed (their directories
 * stay empty), and no credential stays in the workspace (Git's remote URL is reset, Mercurial
 * keeps no password, Fossil's saved credential is deleted).
 */
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
  // a HOME of its own, empty: no configuration a step wrote (a re-clone by a later pod) applies
  const env =
    'export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ALLOW_PROTOCOL=http:https GIT_TERMINAL_PROMPT=0 HGRCPATH= HGPLAIN=1 && HOME="$(mktemp -d)" && export HOME &&';
  switch (job.vcs) {
    case 'git':
      // the credential is not left in .git/config, where step commands could read it
      return `${env} git clone -q --no-checkout ${u} ${d} && git -C ${d} remote set-url origin ${q(job.clone_url)} && git -C ${d} checkout -q ${rev}`;
    case 'hg': {
      const ext = q(`${dest}/.hg/triad_nosubrepos.py`);
      return `${env} hg clone -q -U ${u} ${d} && printf '%s\\n' ${q(HG_NO_SUBREPOS)} > ${ext} && hg -R ${d} --config extensions.triad_nosubrepos=${ext} --config subrepos.allowed=false update -q -r ${rev} && rm -f ${ext}`;
    }
    case 'fossil': {
      const auth = job.clone_token === null ? '' : `-B ${q(`ci:${job.clone_token}`)} `;
      const file = q(`${dest}.fossil`);
      // secure_delete: the freed pages are zeroed, so the (obscured, reversible) value is gone too
      const forget = q(
        "PRAGMA secure_delete=ON; DELETE FROM config WHERE name GLOB 'http-auth:*' OR name IN ('last-sync-pw')",
      );
      return `${env} fossil clone ${auth}${u} ${file} >/dev/null && fossil sql -R ${file} ${forget} >/dev/null && mkdir -p ${d} && cd ${d} && fossil open -f ${file} ${rev} >/dev/null`;
    }
  }
}
