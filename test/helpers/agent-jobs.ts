/** The jobs and steps the server hands an agent, as the agent's tests and benchmarks build them. */
import type { Job, JobStep } from '../../agent/types.ts';

/** A claimed job as the server sends it (a git repository, no steps listed). */
export function testJob(pipelineId: number, over: Partial<Job> = {}): Job {
  return {
    pipeline_id: pipelineId,
    number: 1,
    commit_node: '0123456789abcdef0123456789abcdef01234567',
    branch: 'main',
    tag: '',
    event: 'push',
    events: ['push'],
    clone_url: 'http://triad.triad.svc:3000/acme/widgets',
    clone_token: 'clone-token',
    vcs: 'git',
    org: 'acme',
    repo: 'widgets',
    steps: [],
    ci_env: { CI: 'true' },
    ...over,
  };
}

/** Step 1 `build`: `echo hello` in alpine. */
export function testStep(over: Partial<JobStep> = {}): JobStep {
  return {
    id: 1,
    number: 1,
    name: 'build',
    image: 'alpine:3.20',
    commands: ['echo hello'],
    environment: {},
    status: 'pending',
    ...over,
  };
}
