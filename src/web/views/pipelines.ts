/**
 * Views of CI pipelines: status badges, durations, the list's rows (with selection boxes for
 * those who may delete), a pipeline's summary and its steps.
 */
import type { PipelineJson, StepJson } from '../../pipelines/schemas.ts';
import { html, type Html } from '../html.ts';
import { urls } from '../urls.ts';
import { timeAgo } from './common.ts';

/** Statuses that will change again (rows and pages showing them refresh themselves). */
export const ACTIVE = new Set(['pending', 'running']);

const LABELS: Record<string, string> = {
  pending: 'Pending',
  running: 'Running',
  success: 'Passed',
  failure: 'Failed',
  error: 'Error',
  cancelled: 'Cancelled',
  skipped: 'Skipped',
};

export function statusBadge(status: string): Html {
  return html`<span class="badge status status-${status}">${LABELS[status] ?? status}</span>`;
}

/** "1 min 5 s" between two times (to now while running), or "–" when it has not started. */
export function duration(start: string | null, end: string | null, now = Date.now()): string {
  if (start === null) return '–';
  const ms = (end === null ? now : Date.parse(end)) - Date.parse(start);
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export type RepoRef = { org: string; name: string };

function what(p: PipelineJson): Html {
  const ref = p.tag !== '' ? html`tag <code>${p.tag}</code>` : html`<code>${p.branch}</code>`;
  return html`${p.event} · ${ref} · <code>${p.commit_node.slice(0, 12)}</code>`;
}

/** The rows of the pipeline list (`select`: a selection box per finished row, for deleters). */
export function pipelineRows(r: RepoRef, list: readonly PipelineJson[], select: boolean): Html {
  return html`${list.map((p) => {
    const box = !select
      ? ''
      : ACTIVE.has(p.status)
        ? html`<td></td>`
        : html`<td><input type="checkbox" name="number" value="${String(p.number)}" form="bulk" aria-label="Select pipeline #${String(p.number)}"></td>`;
    return html`<tr data-number="${String(p.number)}"${ACTIVE.has(p.status) ? html` data-active` : ''}>
${box}<td><a href="${urls.pipeline(r.org, r.name, p.number)}">#${String(p.number)}</a></td>
<td>${statusBadge(p.status)}</td>
<td>${what(p)}</td>
<td>${p.trigger_user?.username ?? ''}</td>
<td>${timeAgo(p.created_at)}</td>
<td>${duration(p.started_at, p.finished_at)}</td>
</tr>`;
  })}`;
}

export function pipelineTable(
  r: RepoRef,
  list: readonly PipelineJson[],
  select: boolean,
  rowsUrl: string,
): Html {
  return html`<table class="list pipelines">
<caption class="visually-hidden">Pipelines, newest first</caption>
<thead><tr>${select ? html`<th scope="col"><span class="visually-hidden">Select</span></th>` : ''}<th scope="col">Pipeline</th><th scope="col">Status</th><th scope="col">Commit</th><th scope="col">By</th><th scope="col">Created</th><th scope="col">Duration</th></tr></thead>
<tbody data-refresh="${rowsUrl}">${pipelineRows(r, list, select)}</tbody>
</table>`;
}

/** A pipeline's summary and its steps (each linking to its log page). */
export function pipelineSummary(r: RepoRef, p: PipelineJson, current?: number): Html {
  const steps = p.steps ?? [];
  const error =
    p.error_message === undefined ? '' : html`<p class="flash error" role="status">${p.error_message}</p>`;
  return html`<div class="pipeline-summary"${ACTIVE.has(p.status) ? html` data-active` : ''}>
<p class="heading-row"><span>${statusBadge(p.status)}</span> <span class="meta">${what(p)} · ${p.trigger_user?.username === undefined || p.trigger_user.username === null ? '' : html`by ${p.trigger_user.username} · `}created ${timeAgo(p.created_at)} · ${duration(p.started_at, p.finished_at)}</span></p>
${error}
<ol class="steps" aria-label="Steps">${steps.map((s) => stepItem(r, p, s, current))}</ol>
</div>`;
}

function stepItem(r: RepoRef, p: PipelineJson, s: StepJson, current: number | undefined): Html {
  const exit = s.exit_code === null ? '' : html` · exit ${String(s.exit_code)}`;
  return html`<li><a href="${urls.step(r.org, r.name, p.number, s.number)}"${s.number === current ? html` aria-current="page"` : ''}>${statusBadge(s.status)} <span class="step-name">${s.name}</span></a> <span class="meta"><code>${s.image}</code>${exit} · ${duration(s.started_at, s.finished_at)}</span></li>`;
}
