/**
 * A pull request's conversation (`/-/pulls/:number`): its description and comments rendered from
 * markdown, a comment form (signed in), the edit form and close / reopen (the author and org
 * owners, as the API allows), and the merge box (everyone sees what merging would do; members
 * merge). The merge box is also a fragment (`/merge-box`) that the `recheck` island loads again
 * while the state is `checking`; without script a link checks again. Every POST goes through the
 * pulls service with the session's access, so a forced one the viewer may not make is refused
 * (403, the page shown again with the reason); merge refusals (409) are said in words.
 */
import { ApiError } from '../../../http/errors.ts';
import { parseWith, rejectNul } from '../../../http/input.ts';
import { keptSource } from '../../../pulls/merge.ts';
import { mergeRights } from '../../../pulls/routes.ts';
import { mergePullBody, pullCommentBody, updatePullBody } from '../../../pulls/schemas.ts';
import { field, web, type FormState, type PageCtx, type UserCtx, type WebReply } from '../../context.ts';
import { html } from '../../html.ts';
import { urls } from '../../urls.ts';
import type { WebRouter } from '../../web.ts';
import { actionButton, csrf, formError, input } from '../../views/forms.ts';
import { EDITOR_SCRIPT, editorText, markdownEditor } from '../../views/markdown-editor.ts';
import { commentBox, commentForm, markdownBody, mergeBox, pullHead } from '../../views/pulls.ts';
import { repoHeader } from '../../views/repo.ts';
import { checksBox } from '../../views/checks.ts';
import { timeAgo } from '../../views/common.ts';
import { loadPull, mayEdit, PULLS_MEMBER, textPlace, type PullDeps, type PullPage } from './common.ts';

const BASE = '/:org/:repo/-/pulls/:number';

export function pullDetailPages(w: WebRouter, d: PullDeps): void {
  w.get(BASE, (ctx) => conversation(ctx, d, { values: {} }));
  w.get(`${BASE}/merge-box`, async (ctx) => web.fragment(box(ctx, await loadPull(ctx, d), { values: {} })));
  const post = (
    suffix: string,
    act: (ctx: UserCtx, at: PullPage, values: FormState['values']) => Promise<string | void>,
  ) =>
    w.userPost(
      `${BASE}${suffix}`,
      async (ctx, values) => {
        const at = await loadPull(ctx, d);
        // (what every write of the API needs; merging also needs membership, below)
        await ctx.access.authorize(at.p.target, { scope: 'pulls:write' });
        const anchor = await act(ctx, at, values);
        return web.redirect(`${urls.pull(at.p.repo.org, at.p.repo.name, at.pull.number)}${anchor ?? ''}`);
      },
      { render: (ctx, state) => conversation(ctx, d, state) },
    );
  post('/comments', async (ctx, { p, pull }, values) => {
    const body = parseWith(pullCommentBody, { body: editorText(values, 'comment') }, 'form');
    rejectNul(body, 'form');
    const c = await d.pulls.writes.comment(p.target, ctx.access.actor(), pull.number, body.body);
    return `#comment-${c.id}`;
  });
  post('/edit', async (ctx, { p, pull }, values) => {
    const body = parseWith(
      updatePullBody,
      { title: field(values, 'title'), body: editorText(values, 'body') },
      'form',
    );
    rejectNul(body, 'form');
    await d.pulls.writes.update(p.target, await ctx.access.actorIn(p.target.org.id), pull.number, body);
  });
  post('/state', async (ctx, { p, pull }, values) => {
    const body = parseWith(updatePullBody, { state: field(values, 'state') }, 'form');
    await d.pulls.writes.update(p.target, await ctx.access.actorIn(p.target.org.id), pull.number, body);
  });
  post('/merge', async (ctx, { p, pull }, values) => {
    await ctx.access.authorize(p.target, PULLS_MEMBER);
    const message = field(values, 'message').trim();
    const body = parseWith(
      mergePullBody,
      {
        style: field(values, 'style') || 'merge',
        ...(message === '' ? {} : { message }),
        expected_head: field(values, 'expected_head') || undefined,
        expected_target_head: field(values, 'expected_target_head') || undefined,
        delete_source: field(values, 'delete_source') === 'on',
      },
      'form',
    );
    rejectNul(body, 'form');
    try {
      const rights = await mergeRights(ctx.access, p.target);
      await d.pulls.merges.merge(p.target, ctx.access.actor(), rights, pull.number, body);
    } catch (e) {
      throw e instanceof ApiError && e.status === 409 ? new ApiError(409, e.code, mergeRefusal(e)) : e;
    }
  });
}

/** The merge refusals of DESIGN section 5 (409) in words; `merge_conflict` also names the files. */
const REFUSALS: Record<string, string> = {
  head_moved: 'the source has new commits since this page was shown. Look at them, then merge again.',
  target_moved: 'the target moved since this page was shown. Check the merge again, then merge.',
  not_fast_forward:
    'the target has commits the source lacks, so it cannot be fast-forwarded. Choose a merge commit or a squash.',
  not_open: 'this pull request is no longer open.',
  checks_pending: 'the checks this branch requires have not passed yet. Wait for them, then merge again.',
  checks_failed: 'a check this branch requires failed. Push a fix to the source, then merge again.',
};

function mergeRefusal(e: ApiError): string {
  if (e.code === 'merge_conflict') {
    const files = e.details.conflicted_files ?? [];
    return `Not merged: the merge conflicts in ${files.length === 1 ? 'this file' : `these ${files.length} files`}: ${files.join(', ')}. Resolve them on the source and push it again.`;
  }
  return `Not merged: ${REFUSALS[e.code] ?? `${e.message}.`}`;
}

function box(ctx: PageCtx, at: PullPage, state: FormState) {
  const { p, pull } = at;
  if (pull.status !== 'open') return html``;
  return mergeBox(p.repo.org, p.repo.name, pull, {
    member: p.role !== undefined,
    token: ctx.formToken,
    state,
    keepsSource: keptSource({ vcs: p.repo.vcs, defaultBranch: p.repo.default_branch }, pull.source_ref),
  });
}

async function conversation(ctx: PageCtx, d: PullDeps, state: FormState): Promise<WebReply> {
  const at = await loadPull(ctx, d);
  const { p, pull } = at;
  const { org, name } = p.repo;
  const here = urls.pull(org, name, pull.number);
  const place = textPlace(at);
  const token = ctx.formToken;
  const editing = field(state.values, 'form') === 'edit';
  const edit =
    mayEdit(ctx, at) && token !== undefined
      ? html`<details class="edit-pull"${editing ? html` open` : ''}>
<summary>Edit title and description</summary>
<form method="post" action="${here}/edit" class="card">
${csrf(token)}
<input type="hidden" name="form" value="edit">
${input({ name: 'title', label: 'Title', required: true, maxlength: 1000, value: editing ? field(state.values, 'title') : pull.title })}
${markdownEditor({ repo: p.repo, name: 'body', label: 'Description', rows: 8, value: editing ? field(state.values, 'body') : pull.body })}
<p><button type="submit" class="button primary">Save</button></p>
</form>
</details>
${actionButton(`${here}/state`, token, pull.status === 'open' ? 'Close pull request' : 'Reopen pull request', { hidden: { state: pull.status === 'open' ? 'closed' : 'open' } })}`
      : '';
  const commenting =
    token === undefined
      ? ''
      : commentForm(
          p.repo,
          `${here}/comments`,
          token,
          field(state.values, 'form') === '' ? state : { values: {} },
        );
  const closed =
    pull.status === 'closed'
      ? html`<p class="flash warn">Closed ${timeAgo(pull.closed_at)}. Its commits and files are those it had then.</p>`
      : pull.status === 'merged'
        ? html`<p class="flash ok">Merged ${timeAgo(pull.merged_at)}${pull.merge_commit === null ? '' : html` as <a href="${urls.changeset(org, name, pull.merge_commit)}"><code>${pull.merge_commit.slice(0, 12)}</code></a>`}.</p>`
        : '';
  return web.page(
    `${pull.title} · Pull request #${pull.number} · ${org}/${name}`,
    html`${repoHeader(p, 'pulls')}
${pullHead(org, name, pull, 'conversation')}
${formError(state)}
${closed}
<div class="pr-body">
<article class="comment" aria-labelledby="pr-desc-h">
<header class="comment-head" id="pr-desc-h"><strong>${pull.author?.username ?? 'A former user'}</strong> opened this ${timeAgo(pull.created_at)}</header>
${markdownBody(pull.body, place)}
</article>
${(pull.comments ?? []).map((c) => commentBox(c, place))}
${pull.status === 'open' ? checksBox(pull.checks) : ''}
${box(ctx, at, field(state.values, 'form') === 'merge' ? state : { values: {} })}
${commenting}
${edit}
</div>`,
    { scripts: ['recheck', EDITOR_SCRIPT] },
  );
}
