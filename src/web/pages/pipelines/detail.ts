/**
 * One pipeline (`/:org/:repo/-/pipelines/:number`): its summary and steps, refreshing while it
 * runs, with cancel, rerun and delete for org members (absent for others; 403 when forced). A
 * step's page (`.../steps/:step`) adds its log: the live viewer for signed-in users (the last
 * lines as plain text without JavaScript), a sign-in link for anonymous readers (as the API,
 * logs need an account).
 */
import { web, type FormState, type PageCtx, type UserCtx, type WebReply } from '../../context.ts';
import { html, type Html } from '../../html.ts';
import { idParam } from '../../context.ts';
import { loginUrl } from '../../layout.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import { urls } from '../../urls.ts';
import { confirmDeletion } from '../../views/confirm.ts';
import { actionButton, formError } from '../../views/forms.ts';
import { ACTIVE, pipelineSummary } from '../../views/pipelines.ts';
import { repoHeader } from '../../views/repo.ts';
import type { WebRouter } from '../../web.ts';
import type { PipelineJson } from '../../../pipelines/schemas.ts';
import type { StepLogState } from '../../../pipelines/step-logs.ts';
import { canWrite, READ, WRITE, type PipelineDeps } from './common.ts';

/** The bytes of a log shown without JavaScript (its end). */
const FALLBACK_BYTES = 64 * 1024;
/** Where the live viewer starts a log: this far before its end, the rest filled in behind. */
export const LIVE_TAIL = 256 * 1024;

async function load(ctx: PageCtx, d: PipelineDeps): Promise<{ p: RepoPage; pipe: PipelineJson }> {
  const p = await loadRepo(ctx, d.repos, READ);
  const pipe = await d.pipelines.get(p.target.repo.id, idParam(ctx.params.number));
  return { p, pipe };
}

function actions(p: RepoPage, pipe: PipelineJson, token: string | undefined): Html {
  if (!canWrite(p)) return html``;
  const one = urls.pipeline(p.repo.org, p.repo.name, pipe.number);
  const cancel = ACTIVE.has(pipe.status) ? actionButton(`${one}/cancel`, token, 'Cancel') : '';
  const del = ACTIVE.has(pipe.status) ? '' : html`<a class="button subtle" href="${one}/delete">Delete</a>`;
  return html`<div class="actions">${cancel}${actionButton(`${one}/rerun`, token, 'Rerun')}${del}</div>`;
}

function frame(p: RepoPage, pipe: PipelineJson, ctx: PageCtx, inner: Html, state?: FormState): Html {
  const { org, name } = p.repo;
  return html`${repoHeader(p, 'pipelines')}
<p class="crumbs"><a href="${urls.pipelines(org, name)}">Pipelines</a> /</p>
<div class="heading-row"><h1>Pipeline #${String(pipe.number)}</h1>${actions(p, pipe, ctx.formToken)}</div>
${state === undefined ? '' : formError(state)}
${inner}`;
}

async function pipelinePage(ctx: PageCtx, d: PipelineDeps, state?: FormState): Promise<WebReply> {
  const { p, pipe } = await load(ctx, d);
  const summary = urls.pipeline(p.repo.org, p.repo.name, pipe.number);
  return web.page(
    `Pipeline #${pipe.number} · ${p.repo.org}/${p.repo.name}`,
    frame(
      p,
      pipe,
      ctx,
      html`<div data-refresh="${summary}/summary">${pipelineSummary(p.repo, pipe)}</div>`,
      state,
    ),
    { scripts: ['pipelines'], wide: true },
  );
}

/** The end of a log as plain text (from a line start), for readers without JavaScript. */
async function tailText(d: PipelineDeps, s: StepLogState): Promise<{ text: string; cut: boolean }> {
  const from = Math.max(0, s.size - FALLBACK_BYTES);
  const parts: Buffer[] = [];
  for await (const b of d.pipelines.stepLogs.range(s.stepId, from, s.size)) parts.push(b);
  let bytes = Buffer.concat(parts);
  if (from > 0) bytes = bytes.subarray(bytes.indexOf(10) + 1);
  return { text: bytes.toString('utf8'), cut: from > 0 };
}

async function logSection(
  ctx: PageCtx,
  d: PipelineDeps,
  p: RepoPage,
  pipe: PipelineJson,
  s: StepLogState,
): Promise<Html> {
  const { org, name } = p.repo;
  if (ctx.user === undefined) {
    return html`<section class="log-signin" aria-labelledby="log-h"><h2 id="log-h">Log of ${s.name}</h2>
<p>Step logs are shown to signed-in users. <a href="${loginUrl(ctx.path)}">Sign in</a> to read this one.</p></section>`;
  }
  const raw = urls.step(org, name, pipe.number, s.number, 'raw');
  const { text, cut } = await tailText(d, s);
  const pending =
    s.size === 0 && !s.done ? html`<p class="empty">This step has not written anything yet.</p>` : '';
  return html`<section class="log-viewer" aria-labelledby="log-h" data-live="${urls.step(org, name, pipe.number, s.number, 'live')}" data-raw="${raw}" data-size="${String(s.size)}" data-status="${s.status}" data-tail="${String(LIVE_TAIL)}">
<div class="heading-row"><h2 id="log-h">Log of ${s.name}</h2><a class="button subtle" href="${raw}?download=1">Download raw log</a></div>
<div class="log-fallback">
${cut ? html`<p class="hint">The last lines of ${String(s.size)} bytes; the whole log is in the raw download.</p>` : ''}
${pending}<pre class="log-text" tabindex="0">${text}</pre>
</div>
</section>`;
}

async function stepPage(ctx: PageCtx, d: PipelineDeps): Promise<WebReply> {
  const { p, pipe } = await load(ctx, d);
  const s = await d.pipelines.stepLogs.state(p.target.repo.id, pipe.number, ctx.params.step ?? '');
  const summary = urls.pipeline(p.repo.org, p.repo.name, pipe.number);
  return web.page(
    `${s.name} · pipeline #${pipe.number} · ${p.repo.org}/${p.repo.name}`,
    frame(
      p,
      pipe,
      ctx,
      html`<div class="columns pipeline-step"><div class="side" data-refresh="${summary}/summary?step=${String(s.number)}">${pipelineSummary(p.repo, pipe, s.number)}</div>
<div class="grow">${await logSection(ctx, d, p, pipe, s)}</div></div>`,
    ),
    { scripts: ['pipelines', 'log-viewer'], wide: true },
  );
}

export function pipelinePages(w: WebRouter, d: PipelineDeps): void {
  w.get('/:org/:repo/-/pipelines/:number', (ctx) => pipelinePage(ctx, d));
  w.get('/:org/:repo/-/pipelines/:number/summary', async (ctx) => {
    const { p, pipe } = await load(ctx, d);
    const step =
      ctx.query.step !== undefined && /^\d{1,6}$/.test(ctx.query.step) ? Number(ctx.query.step) : undefined;
    return web.fragment(pipelineSummary(p.repo, pipe, step));
  });
  w.get('/:org/:repo/-/pipelines/:number/steps/:step', (ctx) => stepPage(ctx, d));

  const again = (ctx: UserCtx, state: FormState) => pipelinePage(ctx, d, state);
  const act = (suffix: string, run: (repoId: number, n: number, ctx: UserCtx) => Promise<string>) =>
    w.userPost(
      `/:org/:repo/-/pipelines/:number/${suffix}`,
      async (ctx) => {
        const p = await loadRepo(ctx, d.repos, WRITE);
        return web.redirect(await run(p.target.repo.id, idParam(ctx.params.number), ctx));
      },
      { render: again },
    );
  act('cancel', async (repoId, n, ctx) => {
    await d.pipelines.cancel(repoId, n);
    return urls.pipeline(ctx.params.org ?? '', ctx.params.repo ?? '', n);
  });
  act('rerun', async (repoId, n, ctx) => {
    const fresh = await d.pipelines.rerun(repoId, n, ctx.user.id);
    return urls.pipeline(ctx.params.org ?? '', ctx.params.repo ?? '', fresh.number);
  });
  const deletePage = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    const p = await loadRepo(ctx, d.repos, WRITE);
    const pipe = await d.pipelines.get(p.target.repo.id, idParam(ctx.params.number));
    const one = urls.pipeline(p.repo.org, p.repo.name, pipe.number);
    return web.page(
      `Delete pipeline #${pipe.number} · ${p.repo.org}/${p.repo.name}`,
      html`${repoHeader(p, 'pipelines')}${formError(state)}
${confirmDeletion({
  question: `Delete pipeline #${pipe.number}?`,
  detail: 'The pipeline goes with its steps and logs. Its number is not used again.',
  action: `${one}/delete`,
  formToken: ctx.formToken,
  button: `Delete pipeline #${pipe.number}`,
  cancel: one,
})}`,
    );
  };
  w.form('/:org/:repo/-/pipelines/:number/delete', deletePage, async (ctx) => {
    const p = await loadRepo(ctx, d.repos, WRITE);
    await d.pipelines.deletion.delete(p.target.repo.id, [idParam(ctx.params.number)]);
    return web.redirect(`${urls.pipelines(p.repo.org, p.repo.name)}?deleted=1`);
  });
}
