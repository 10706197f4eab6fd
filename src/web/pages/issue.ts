/**
 * One issue (`/:org/:repo/-/issues/:number`): its text and comments rendered, labels, assignees,
 * severity, and the forms of what the viewer may do, each a POST below the issue calling the
 * issues service method the API's route calls (same validation, events and webhooks):
 * `comments`, `labels` and `labels/remove`, `assignees` and `assignees/remove`, `severity`,
 * `state` (the issue's author or an organization owner; otherwise 403 as an error page), `pin`
 * and `unpin` (organization members). A refused form shows the issue again with the reason.
 */
import { ApiError } from '../../http/errors.ts';
import { parseWith } from '../../http/input.ts';
import { addLabelBody, commentBody, severitySchema, updateIssueBody } from '../../issues/schemas.ts';
import { z } from 'zod';
import {
  field,
  idParam,
  web,
  type FormState,
  type PageCtx,
  type UserCtx,
  type WebReply,
} from '../context.ts';
import { html } from '../html.ts';
import { loadRepo, type RepoPage } from '../repo-page.ts';
import { urls } from '../urls.ts';
import type { WebRouter } from '../web.ts';
import { formError } from '../views/forms.ts';
import { repoHeader } from '../views/repo.ts';
import { severityBadge, stateBadge, userLink } from '../views/issues.ts';
import { commentForm, issueSide, issueThread, type IssueControls } from '../views/issue.ts';
import { EDITOR_SCRIPT, editorText } from '../views/markdown-editor.ts';
import { memberChoices, READ, WRITE, type IssueDeps } from './issues.ts';
import { timeAgo } from '../views/common.ts';

const PATH = '/:org/:repo/-/issues/:number';

async function detailPage(d: IssueDeps, ctx: PageCtx, state: FormState): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, READ);
  const number = idParam(ctx.params.number);
  const issue = await d.issues.reads.detail(p.target, number);
  const { repo } = p;
  let controls: IssueControls | undefined;
  if (ctx.user !== undefined && ctx.formToken !== undefined) {
    const member = p.role !== undefined;
    const [catalog, members, pins] = await Promise.all([
      d.issues.labels.catalog(p.target),
      memberChoices(d, p),
      member ? d.issues.pins.list(p.target) : Promise.resolve(undefined),
    ]);
    controls = {
      formToken: ctx.formToken,
      catalog,
      members,
      canChangeState: issue.author?.id === ctx.user.id || p.role === 'owner',
      pins:
        pins === undefined
          ? undefined
          : { pinned: pins.some((i) => i.id === issue.id), count: pins.length, max: d.issues.pins.max },
    };
  }
  const comments = issue.comments?.length ?? 0;
  const kept = field(state.values, 'form') === 'comment' ? field(state.values, 'body') : '';
  const reply =
    controls === undefined
      ? html`<p class="sign-in-note"><a href="/-/login?return_to=${encodeURIComponent(ctx.path)}">Sign in</a> to comment.</p>`
      : commentForm(repo, issue.number, controls.formToken, kept);
  return web.page(
    `${issue.title} · Issue #${issue.number} · ${repo.org}/${repo.name}`,
    html`${repoHeader(p, 'issues')}
<p class="crumbs"><a href="${urls.issues(repo.org, repo.name)}">Issues</a> /</p>
<h1 class="issue-title break">${issue.title} <span class="issue-number">#${issue.number}</span></h1>
<p class="issue-meta">${stateBadge(issue.state)} ${severityBadge(issue.severity)} ${userLink(issue.author)} opened this issue ${timeAgo(issue.created_at)} · ${comments} ${comments === 1 ? 'comment' : 'comments'}</p>
${formError(state)}
<div class="columns">
<div class="grow thread">
${issueThread(repo, issue)}
${reply}
</div>
${issueSide(repo, issue, controls)}
</div>`,
    { scripts: controls === undefined ? [] : [EDITOR_SCRIPT], wide: true },
  );
}

type Act = (ctx: UserCtx, p: RepoPage, number: number, values: FormState['values']) => Promise<string | void>;

export function issuePages(w: WebRouter, d: IssueDeps): void {
  const { writes, pins } = d.issues;
  const again = (ctx: UserCtx, state: FormState) => detailPage(d, ctx, state);
  /**
   * A POST below the issue: the repository as the API's write routes load it, then `act`; back to
   * the issue (or where `act` says). `errorPage`: a refusal is an error page, not the issue again.
   */
  const action = (suffix: string, act: Act, opts: { errorPage?: boolean } = {}) =>
    w.userPost(
      `${PATH}/${suffix}`,
      async (ctx, values) => {
        const p = await loadRepo(ctx, d.repos, WRITE);
        const number = idParam(ctx.params.number);
        const to = await act(ctx, p, number, values);
        return web.redirect(to ?? urls.issue(p.repo.org, p.repo.name, number));
      },
      opts.errorPage === true ? {} : { render: again },
    );

  w.get(PATH, (ctx) => detailPage(d, ctx, { values: {} }));
  action('comments', async (ctx, p, number, values) => {
    const body = parseWith(commentBody, { body: editorText(values, 'body') }, 'form');
    const c = await writes.comment(p.target, ctx.access.actor(), number, body.body);
    return `${urls.issue(p.repo.org, p.repo.name, number)}#comment-${c.id}`;
  });
  action('labels', async (_ctx, p, number, values) => {
    const body = parseWith(addLabelBody, { name: field(values, 'name') }, 'form');
    await writes.addLabel(p.target, number, body.name);
  });
  action('labels/remove', async (_ctx, p, number, values) => {
    await writes.removeLabel(p.target, number, field(values, 'name'));
  });
  action('assignees', async (_ctx, p, number, values) => {
    const username = parseWith(
      z.string().trim().min(1, 'give a username').max(255),
      field(values, 'username'),
      'form.username',
    );
    await writes.addAssignee(p.target, number, { username }).catch((e: unknown) => {
      // someone who is not a member: the issue again, saying so
      throw e instanceof ApiError && e.status === 404 ? new ApiError(422, 'unprocessable', e.message) : e;
    });
  });
  action('assignees/remove', async (_ctx, p, number, values) => {
    await writes.removeAssignee(p.target, number, idParam(field(values, 'user_id')));
  });
  action('severity', async (ctx, p, number, values) => {
    const severity = parseWith(severitySchema, field(values, 'severity'), 'form.severity');
    await writes.update(p.target, await ctx.access.actorIn(p.target.org.id), number, { severity });
  });
  action(
    'state',
    async (ctx, p, number, values) => {
      const body = parseWith(updateIssueBody, { state: field(values, 'state') }, 'form');
      await writes.update(p.target, await ctx.access.actorIn(p.target.org.id), number, body);
    },
    { errorPage: true },
  );
  action('pin', async (ctx, p, number) =>
    pins.pin(p.target, await ctx.access.actorIn(p.target.org.id), number),
  );
  action('unpin', async (ctx, p, number) =>
    pins.unpin(p.target, await ctx.access.actorIn(p.target.org.id), number),
  );
}
