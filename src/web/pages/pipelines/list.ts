/**
 * The pipelines of a repository (`/:org/:repo/-/pipelines`): the list with its status filter and
 * paging (as the API), rows that refresh while some are pending or running, and deletion for org
 * members: selected pipelines, or every failed one (`failure` and `error`), each after a
 * confirmation that names what goes.
 */
import { PIPELINE_STATUSES } from '../../../pipelines/model.ts';
import type { PipelineJson } from '../../../pipelines/schemas.ts';
import { ApiError } from '../../../http/errors.ts';
import {
  field,
  fieldList,
  web,
  type FormState,
  type PageCtx,
  type UserCtx,
  type WebReply,
} from '../../context.ts';
import { html, type Html } from '../../html.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import { pager, pageParam } from '../../views/common.ts';
import { confirmDeletion } from '../../views/confirm.ts';
import { csrf, formError } from '../../views/forms.ts';
import { pipelineRows, pipelineTable } from '../../views/pipelines.ts';
import { repoHeader } from '../../views/repo.ts';
import type { WebRouter } from '../../web.ts';
import { canWrite, READ, WRITE, type PipelineDeps } from './common.ts';

const PER_PAGE = 20;

type Listing = { status: string | undefined; page: number; items: PipelineJson[]; total: number };

async function listing(ctx: PageCtx, d: PipelineDeps, p: RepoPage): Promise<Listing> {
  const status = (PIPELINE_STATUSES as readonly string[]).includes(ctx.query.status ?? '')
    ? (ctx.query.status as (typeof PIPELINE_STATUSES)[number])
    : undefined;
  const page = pageParam(ctx.query.page);
  const r = await d.pipelines.list(p.target.repo.id, { status, page, per_page: PER_PAGE });
  return { status, page, items: r.pipelines, total: r.total };
}

function query(l: Pick<Listing, 'status' | 'page'>): string {
  const q = new URLSearchParams();
  if (l.status !== undefined) q.set('status', l.status);
  if (l.page > 1) q.set('page', String(l.page));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

function filter(base: string, status: string | undefined): Html {
  const opts = ['', ...PIPELINE_STATUSES].map(
    (s) =>
      html`<option value="${s}"${s === (status ?? '') ? html` selected` : ''}>${s === '' ? 'Any status' : s}</option>`,
  );
  return html`<form method="get" action="${base}" class="inline filter">
<label for="f-status">Status</label> <select id="f-status" name="status">${opts}</select>
<button type="submit" class="secondary">Filter</button>
</form>`;
}

async function listPage(ctx: PageCtx, d: PipelineDeps, state: FormState = { values: {} }): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, READ);
  const l = await listing(ctx, d, p);
  const { org, name } = p.repo;
  const base = urls.pipelines(org, name);
  const write = canWrite(p);
  const failed = write ? await d.pipelines.deletion.failedSummary(p.target.repo.id) : undefined;
  const deleted = ctx.query.deleted;
  const flash =
    deleted !== undefined && /^\d+$/.test(deleted)
      ? html`<p class="flash ok" role="status">${deleted} pipeline${deleted === '1' ? ' was' : 's were'} deleted.</p>`
      : '';
  const tools =
    failed === undefined
      ? ''
      : html`<div class="actions">
<form id="bulk" method="post" action="${base}/delete" class="inline">${csrf(ctx.formToken)}<button type="submit" class="secondary">Delete selected</button></form>
${failed.failed === 0 ? '' : html`<a class="button danger" href="${base}/delete-failed">Delete all failed (${String(failed.failed)})</a>`}
</div>`;
  const body =
    l.items.length === 0
      ? html`<p class="empty">${l.status === undefined ? 'No pipelines yet. A push with a pipeline file starts one.' : `No ${l.status} pipelines.`}</p>`
      : pipelineTable(p.repo, l.items, write, `${base}/rows${query(l)}`);
  return web.page(
    `Pipelines · ${org}/${name}`,
    html`${repoHeader(p, 'pipelines')}
<div class="heading-row"><h1>Pipelines</h1>${filter(base, l.status)}</div>
${flash}${formError(state)}
${tools}
${body}
${pager(`${base}${query({ ...l, page: 1 })}`, l.page, PER_PAGE, l.total)}`,
    { scripts: ['pipelines'], wide: true },
  );
}

/** The confirmation of a bulk deletion: the numbers selected, sent again with `confirm`. */
function confirmPage(p: RepoPage, ctx: UserCtx, numbers: number[], state: FormState): WebReply {
  const base = urls.pipelines(p.repo.org, p.repo.name);
  const what = `${numbers.length} pipeline${numbers.length === 1 ? '' : 's'}`;
  return web.page(
    `Delete pipelines · ${p.repo.org}/${p.repo.name}`,
    html`${repoHeader(p, 'pipelines')}${formError(state)}
${confirmDeletion({
  question: `Delete ${what}?`,
  detail: `Pipelines ${numbers.map((n) => `#${n}`).join(', ')} go with their steps and logs. Their numbers are not used again.`,
  action: `${base}/delete`,
  formToken: ctx.formToken,
  button: `Delete ${what}`,
  cancel: base,
  hidden: { confirm: '1', number: numbers.map(String) },
})}`,
  );
}

function numbersOf(values: FormState['values']): number[] {
  const raw = fieldList(values, 'number');
  if (raw.some((v) => !/^[1-9]\d{0,9}$/.test(v)))
    throw ApiError.badRequest('pipeline numbers must be whole numbers');
  return [...new Set(raw.map(Number))];
}

export function pipelineListPages(w: WebRouter, d: PipelineDeps): void {
  w.get('/:org/:repo/-/pipelines', (ctx) => listPage(ctx, d));
  w.get('/:org/:repo/-/pipelines/rows', async (ctx) => {
    const p = await loadRepo(ctx, d.repos, READ);
    const l = await listing(ctx, d, p);
    return web.fragment(pipelineRows(p.repo, l.items, canWrite(p)));
  });

  const bulkAgain = async (ctx: UserCtx, state: FormState) => {
    const p = await loadRepo(ctx, d.repos, WRITE);
    return confirmPage(p, ctx, numbersOf(state.values), state);
  };
  w.userPost(
    '/:org/:repo/-/pipelines/delete',
    async (ctx, values) => {
      const p = await loadRepo(ctx, d.repos, WRITE);
      const numbers = numbersOf(values);
      if (numbers.length === 0)
        return listPage(ctx, d, { values, error: 'Select the pipelines to delete first.' });
      if (field(values, 'confirm') !== '1') return confirmPage(p, ctx, numbers, { values: {} });
      const gone = await d.pipelines.deletion.delete(p.target.repo.id, numbers);
      return web.redirect(`${urls.pipelines(p.repo.org, p.repo.name)}?deleted=${gone.length}`);
    },
    { render: bulkAgain },
  );

  const failedPage = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    const p = await loadRepo(ctx, d.repos, WRITE);
    const base = urls.pipelines(p.repo.org, p.repo.name);
    const { failed, newest } = await d.pipelines.deletion.failedSummary(p.target.repo.id);
    const what = `${failed} failed pipeline${failed === 1 ? '' : 's'}`;
    const body =
      failed === 0
        ? html`<h1>Delete all failed pipelines?</h1><p class="empty">No failed pipelines.</p><p><a href="${base}">Back to the pipelines</a></p>`
        : confirmDeletion({
            question: 'Delete all failed pipelines?',
            detail: `Every pipeline that ended as failed or error goes, with its steps and logs: ${failed} pipeline${failed === 1 ? '' : 's'} now. Pipelines that fail after this page was opened stay.`,
            action: `${base}/delete-failed`,
            formToken: ctx.formToken,
            button: `Delete ${what}`,
            cancel: base,
            hidden: { up_to: String(newest) },
          });
    return web.page(
      `Delete failed pipelines · ${p.repo.org}/${p.repo.name}`,
      html`${repoHeader(p, 'pipelines')}${formError(state)}${body}`,
    );
  };
  w.form('/:org/:repo/-/pipelines/delete-failed', failedPage, async (ctx, values) => {
    const p = await loadRepo(ctx, d.repos, WRITE);
    const upTo = field(values, 'up_to');
    if (!/^\d{1,10}$/.test(upTo)) throw ApiError.badRequest('up_to must be a pipeline number');
    const gone = await d.pipelines.deletion.deleteFailed(p.target.repo.id, Number(upTo));
    return web.redirect(`${urls.pipelines(p.repo.org, p.repo.name)}?deleted=${gone.length}`);
  });
}
