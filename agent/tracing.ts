import { inSpan } from '../src/telemetry/spans.ts';
import type { Job, JobStep } from './types.ts';

/**
 * The agent's spans (with tracing on, `OTEL_EXPORTER_OTLP_ENDPOINT`): one per pipeline it runs
 * (`ci.pipeline`) and one per step (`ci.step <name>`) under it. Its calls to the server made
 * meanwhile (status reports, log chunks) carry their `traceparent` (client.ts), so the server's
 * request spans join the pipeline's trace.
 */
export function pipelineSpan<T>(job: Job, fn: () => Promise<T>): Promise<T> {
  const attributes = {
    'ci.pipeline.id': job.pipeline_id,
    'ci.pipeline.number': job.number,
    'repo.name': `${job.org}/${job.repo}`,
    'vcs.kind': job.vcs,
    'vcs.revision': job.commit_node,
  };
  return inSpan('ci.pipeline', { attributes }, fn);
}

export function stepSpan<T>(step: JobStep, fn: () => Promise<T>): Promise<T> {
  const attributes = { 'ci.step.id': step.id, 'ci.step.number': step.number, 'ci.step.name': step.name };
  return inSpan(`ci.step ${step.name}`, { attributes }, fn);
}
