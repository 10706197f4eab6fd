/**
 * The issues of a repository: the list (`/:org/:repo/-/issues`, every filter of the API's list as
 * query parameters, paged as the API; the pinned issues above it on the first page) and a new
 * issue (`/-/issues/new`: the template chooser when the repository has templates, then the form,
 * prefilled from the template). Reads and writes go through the issues service as the API's do.
 */
import { ApiError } from '../../http/errors.ts';
import { parseWith } from '../../http/input.ts';
import { createIssueBody, listIssuesQuery, type LabelJson } from '../../issues/schemas.ts';
import type { IssuesService } from '../../issues/service.ts';
import { chosenTemplate, type TemplateSet } from '../../issues/templates.ts';
import type { OrgsService } from '../../orgs/service.ts';
import type { ReposService } from '../../repos/service.ts';
import {
  field,
  fieldList,
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
import { pager } from '../views/common.ts';
import { repoHeader } from '../views/repo.ts';
import { filterForm, issueList, listQueryString, PAGE_STATE, pinnedBox } from '../views/issues.ts';
import { draftOf, issueForm, templateChooser, templateProblems } from '../views/issue-new.ts';
import { EDITOR_SCRIPT, editorText } from '../views/markdown-editor.ts';

export type IssueDeps = {
  issues: IssuesService;
  repos: Pick<ReposService, 'get' | 'json'>;
  orgs: Pick<OrgsService, 'members'>;
};

export const READ = { scope: 'issues:read' } as const;
export const WRITE = { scope: 'issues:write' } as const;

/** Most members offered as assignees to choose from (a larger organization types usernames). */
const MAX_MEMBER_CHOICES = 100;

/**
 * The members offered as assignees, for a viewer who is one of them (the member list is theirs
 * to see, as in the API); undefined: a username is typed.
 */
export async function memberChoices(
  d: IssueDeps,
  p: RepoPage,
): Promise<{ id: number; username: string }[] | undefined> {
  if (p.role === undefined) return undefined;
  const page = await d.orgs.members(p.target.org.id, { page: 1, per_page: MAX_MEMBER_CHOICES });
  if (page.total > MAX_MEMBER_CHOICES) return undefined;
  return page.items.map((m) => ({ id: m.user.id, username: m.user.username }));
}

/**
 * The list's query from the address: empty fields are no filter; a bad value is a 400 page. The
 * pages list new and open issues unless a state is asked for (the API's default is `open`, which
 * would hide every issue nobody has triaged yet).
 */
function listQuery(ctx: PageCtx) {
  const given = Object.fromEntries(Object.entries(ctx.query).filter(([, v]) => v !== ''));
  return parseWith(listIssuesQuery, { state: PAGE_STATE, ...given }, 'query');
}

async function listPage(d: IssueDeps, ctx: PageCtx): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, READ);
  const q = listQuery(ctx);
  const r = { org: p.repo.org, name: p.repo.name };
  const [list, catalog, pins] = await Promise.all([
    d.issues.reads.list(p.target, q),
    d.issues.labels.catalog(p.target),
    q.page === 1 ? d.issues.pins.list(p.target) : Promise.resolve([]),
  ]);
  const qs = listQueryString(q);
  const filtered = qs !== '' && qs !== `per_page=${q.per_page}`;
  const count = `${list.total} ${list.total === 1 ? 'issue' : 'issues'}`;
  return web.page(
    `Issues · ${p.repo.org}/${p.repo.name}`,
    html`${repoHeader(p, 'issues')}
<div class="heading-row"><h1>Issues</h1><a class="button primary" href="${urls.newIssue(r.org, r.name)}">New issue</a></div>
${pinnedBox(r, pins)}
${filterForm(
  r,
  q,
  catalog.map((l) => l.name),
)}
<h2 class="list-count" aria-live="polite">${count}</h2>
${issueList(r, list.items, filtered)}
${pager(urls.issues(r.org, r.name, qs), q.page, q.per_page, list.total)}`,
    { wide: true },
  );
}

type NewChoice =
  | { kind: 'chooser' }
  | { kind: 'form'; template: TemplateSet['templates'][number] | undefined; chooseAgain: boolean };

/** What `/-/issues/new` shows: the chooser, or the form of a template (or blank). */
function newChoice(ctx: UserCtx, set: TemplateSet, state: FormState): NewChoice {
  if (field(state.values, 'form') === 'issue') {
    const file = field(state.values, 'template');
    const template = set.templates.find((t) => t.file === file);
    return { kind: 'form', template, chooseAgain: template === undefined && !set.blankIssues };
  }
  const file = ctx.query.template;
  if (file !== undefined) return { kind: 'form', template: chosenTemplate(set, file), chooseAgain: false };
  if (set.templates.length === 0 || (ctx.query.blank === '1' && set.blankIssues)) {
    return { kind: 'form', template: undefined, chooseAgain: false };
  }
  return { kind: 'chooser' };
}

async function newPage(d: IssueDeps, ctx: UserCtx, state: FormState): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, WRITE);
  const set = await d.issues.templates.read(p.target);
  const title = `New issue · ${p.repo.org}/${p.repo.name}`;
  const choice = newChoice(ctx, set, state);
  const members = p.role !== undefined;
  if (choice.kind === 'chooser') {
    return web.page(title, html`${repoHeader(p, 'issues')}${templateChooser(p.repo, set, members)}`, {
      wide: true,
    });
  }
  const [catalog, memberList]: [LabelJson[], Awaited<ReturnType<typeof memberChoices>>] = await Promise.all([
    d.issues.labels.catalog(p.target),
    memberChoices(d, p),
  ]);
  const draft = draftOf(choice.template, state);
  const form = issueForm(
    p.repo,
    draft,
    {
      formToken: ctx.formToken,
      catalog,
      members: memberList,
      templates: choice.chooseAgain ? set.templates : undefined,
    },
    state,
  );
  const from =
    choice.template === undefined
      ? ''
      : html`<p class="meta">From the template <strong>${choice.template.name}</strong>.</p>`;
  return web.page(
    title,
    html`${repoHeader(p, 'issues')}
<h1>New issue</h1>
${from}
${members && set.templates.length === 0 ? templateProblems(set) : ''}
${form}`,
    { scripts: [EDITOR_SCRIPT], wide: true },
  );
}

async function createIssue(d: IssueDeps, ctx: UserCtx, values: FormState['values']): Promise<WebReply> {
  const p = await loadRepo(ctx, d.repos, WRITE);
  const set = await d.issues.templates.read(p.target);
  try {
    chosenTemplate(set, field(values, 'template'));
  } catch (e) {
    // (a template that went away since the form was shown: choose again)
    if (e instanceof ApiError && e.status === 404) throw new ApiError(422, 'unprocessable', e.message);
    throw e;
  }
  const typed = field(values, 'assignees_text');
  const usernames = (typed === '' ? fieldList(values, 'assignees') : typed.split(','))
    .map((u) => u.trim())
    .filter((u) => u !== '');
  const body = parseWith(
    createIssueBody,
    {
      title: field(values, 'title'),
      body: editorText(values, 'body'),
      severity: field(values, 'severity') === '' ? 'none' : field(values, 'severity'),
      labels: fieldList(values, 'labels'),
      assignees: usernames.map((username) => ({ username })),
    },
    'form',
  );
  const issue = await d.issues.writes.create(p.target, ctx.access.actor(), body).catch((e: unknown) => {
    // an unknown label or assignee: the form again, with what was typed and why
    throw e instanceof ApiError && e.status === 404 ? new ApiError(422, 'unprocessable', e.message) : e;
  });
  return web.redirect(urls.issue(p.repo.org, p.repo.name, issue.number));
}

export function issueListPages(w: WebRouter, d: IssueDeps): void {
  w.get('/:org/:repo/-/issues', (ctx) => listPage(d, ctx));
  w.form(
    '/:org/:repo/-/issues/new',
    (ctx, state) => newPage(d, ctx, state),
    (ctx, values) => createIssue(d, ctx, values),
  );
}
