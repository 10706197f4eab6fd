/**
 * The label catalog's pages, at its three scopes: the site's (`/-/admin/labels`, site
 * administrators), an organization's (`/:org/-/labels`, its owners) and a repository's
 * (`/:org/:repo/-/labels`: the merged catalog for anyone who sees the repository; its
 * organization's owners manage the repository's own labels there). Who may manage a scope is as
 * for the API's create endpoints; each scope has the same pages below its list: a label's form
 * (`/:id`) and the confirmation of its deletion (`/:id/delete`).
 */
import { parseWith } from '../../http/input.ts';
import type { LabelCatalog, LabelOwner } from '../../issues/labels.ts';
import { createLabelBody } from '../../issues/schemas.ts';
import type { ReposService } from '../../repos/service.ts';
import { html, type Html } from '../html.ts';
import {
  field,
  idParam,
  web,
  type FormState,
  type PageCtx,
  type UserCtx,
  type WebReply,
} from '../context.ts';
import type { WebRouter } from '../web.ts';
import { loadRepo } from '../repo-page.ts';
import { formError } from '../views/forms.ts';
import { adminFrame } from '../views/admin.ts';
import { orgHeader } from '../views/org.ts';
import { repoHeader } from '../views/repo.ts';
import {
  defaultColor,
  deleteConfirm,
  issueCount,
  labelChip,
  labelForm,
  labelTable,
  mergedTable,
  type LabelPlace,
} from '../views/labels.ts';
import { urls } from '../urls.ts';

/** Managing organization and repository labels: as the API's create (org owner, issues:write). */
const MANAGE = { scope: 'issues:write', role: 'owner' } as const;

type Deps = { labels: LabelCatalog; repos: Pick<ReposService, 'get' | 'json'> };

/** A scope its manager is looking at: whose labels, and where. */
type Managed = { owner: LabelOwner; place: LabelPlace };

/** A scope's pages: the list's path, a manager's request resolved (403/404 otherwise), its list. */
type Scope = {
  path: string;
  manage: (ctx: PageCtx) => Promise<Managed>;
  list: (ctx: PageCtx, state: FormState) => Promise<WebReply>;
};

const INTRO: Record<LabelPlace['what'], (name: string) => Html> = {
  site: () =>
    html`<p>Site labels can be used on the issues of every repository. An organization or repository label of the same name takes a site label's place there.</p>`,
  organization: (name) =>
    html`<p>The labels of ${name} can be used on the issues of each of its repositories. A repository label of the same name takes their place in that repository.</p>`,
  repository: (name) =>
    html`<p>The labels the issues of ${name} can use: the site's, its organization's and its own. Where several have the same name, the most specific one is used: the repository's, then the organization's.</p>`,
};

/** The message of a form's result, from the query of the redirect after it. */
function flash(ctx: PageCtx, state: FormState): Html | '' {
  if (state.error !== undefined) return '';
  const q = ctx.query;
  const deleted = q.deleted !== undefined && /^\d{1,9}$/.test(q.deleted) ? Number(q.deleted) : undefined;
  const text =
    q.created === '1'
      ? 'The label was created.'
      : q.saved === '1'
        ? 'The label was saved. Every issue that carries it shows it so.'
        : deleted !== undefined
          ? `The label was deleted${deleted === 0 ? '.' : ` and taken off ${issueCount(deleted)}.`}`
          : undefined;
  return text === undefined ? '' : html`<p class="flash ok" role="status">${text}</p>`;
}

/** What an edit changes on the issues. */
function carriedBy(n: number): string {
  if (n === 0) return 'No issue carries this label yet.';
  const which = n === 1 ? 'the issue that carries' : `the ${n} issues that carry`;
  return `A new name, colour or description shows at once on ${which} it.`;
}

/** The form adding a label to a scope. */
function newLabelSection(place: LabelPlace, token: string, state: FormState, existing: number): Html {
  return html`<section aria-labelledby="new-label-h">
<h2 id="new-label-h">New label</h2>
${formError(state)}
${labelForm(place.base, token, state, { color: defaultColor(existing) })}
</section>`;
}

function scopes(d: Deps): Scope[] {
  /** The list page of a scope only its managers see (site, organization). */
  const managedList = (manage: Scope['manage']) => async (ctx: PageCtx, state: FormState) => {
    const { owner, place } = await manage(ctx);
    const items = await d.labels.list(owner);
    return web.page(
      `Labels · ${place.name}`,
      place.frame(html`<h1>Labels</h1>
${INTRO[place.what](place.name)}
${flash(ctx, state)}
${labelTable(place, items)}
${newLabelSection(place, ctx.formToken ?? '', state, items.length)}`),
    );
  };

  const site: Scope['manage'] = (ctx) => {
    ctx.access.admin();
    return Promise.resolve({
      owner: { scope: 'admin' },
      place: {
        base: urls.adminLabels,
        name: 'the site',
        what: 'site',
        frame: (body) => adminFrame('labels', body),
      },
    });
  };
  const org: Scope['manage'] = async (ctx) => {
    const o = await ctx.access.org(ctx.params.org ?? '', MANAGE);
    const role = await ctx.access.roleIn(o.id);
    return {
      owner: { scope: 'org', orgId: o.id },
      place: {
        base: urls.orgLabels(o.name),
        name: o.name,
        what: 'organization',
        frame: (body) => html`${orgHeader(o.name, role, 'labels')}${body}`,
      },
    };
  };
  const repoPlace = (p: Awaited<ReturnType<typeof loadRepo>>): LabelPlace => ({
    base: urls.labels(p.repo.org, p.repo.name),
    name: `${p.repo.org}/${p.repo.name}`,
    what: 'repository',
    frame: (body) => html`${repoHeader(p, 'labels')}${body}`,
  });
  const repo: Scope['manage'] = async (ctx) => {
    const p = await loadRepo(ctx, d.repos, MANAGE);
    return { owner: { scope: 'repo', repoId: p.target.repo.id }, place: repoPlace(p) };
  };
  /** A repository's merged catalog: for all who see the repository, with forms for its owners. */
  const repoList = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
    const p = await loadRepo(ctx, d.repos);
    const place = repoPlace(p);
    const manage = p.role === 'owner' && ctx.formToken !== undefined;
    const items = await d.labels.merged(p.target);
    const broader = {
      org: manage ? urls.orgLabels(p.repo.org) : undefined,
      site: ctx.user?.isAdmin === true ? urls.adminLabels : undefined,
    };
    const own = items.filter((l) => l.scope === 'repo').length;
    const orgLink =
      broader.org === undefined
        ? ''
        : html`<a class="button subtle" href="${broader.org}">Labels of ${p.repo.org}</a>`;
    return web.page(
      `Labels · ${place.name}`,
      place.frame(html`<div class="heading-row"><h1>Labels</h1>${orgLink}</div>
${INTRO.repository(place.name)}
${flash(ctx, state)}
${manage ? '' : formError(state)}
${mergedTable(place.base, items, manage, broader)}
${manage ? newLabelSection(place, ctx.formToken ?? '', state, own) : ''}`),
    );
  };
  return [
    { path: urls.adminLabels, manage: site, list: managedList(site) },
    { path: '/:org/-/labels', manage: org, list: managedList(org) },
    { path: '/:org/:repo/-/labels', manage: repo, list: repoList },
  ];
}

/** The fields of the label form, as the API's create body checks them. */
function labelBody(values: FormState['values']) {
  return parseWith(
    createLabelBody,
    {
      name: field(values, 'name'),
      color: field(values, 'color'),
      description: field(values, 'description'),
    },
    'form',
  );
}

export function labelPages(w: WebRouter, d: Deps): void {
  const labels = d.labels;
  for (const s of scopes(d)) {
    const editPage = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
      const { owner, place } = await s.manage(ctx);
      const l = await labels.get(owner, idParam(ctx.params.id));
      return web.page(
        `${l.name} · Labels · ${place.name}`,
        place.frame(html`<p class="crumbs"><a href="${place.base}">Labels</a> /</p>
<h1>Edit the label ${labelChip(l)}</h1>
${formError(state)}
${labelForm(urls.label(place.base, l.id), ctx.formToken ?? '', state, { label: l })}
<p>${carriedBy(l.issues)}</p>
<p><a href="${urls.labelDelete(place.base, l.id)}" class="danger-link">Delete this label…</a></p>`),
      );
    };
    const confirmPage = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
      const { owner, place } = await s.manage(ctx);
      const l = await labels.get(owner, idParam(ctx.params.id));
      return web.page(
        `Delete ${l.name} · Labels · ${place.name}`,
        place.frame(html`<p class="crumbs"><a href="${place.base}">Labels</a> /</p>
${formError(state)}
${deleteConfirm(place, l, ctx.formToken ?? '')}`),
      );
    };

    w.get(s.path, (ctx) => s.list(ctx, { values: {} }));
    w.userPost(
      s.path,
      async (ctx, values) => {
        const { owner, place } = await s.manage(ctx);
        await labels.create(owner, labelBody(values));
        return web.redirect(`${place.base}?created=1`);
      },
      { render: (ctx: UserCtx, state) => s.list(ctx, state) },
    );
    w.userGet(`${s.path}/:id`, (ctx) => editPage(ctx, { values: {} }));
    w.userPost(
      `${s.path}/:id`,
      async (ctx, values) => {
        const { owner, place } = await s.manage(ctx);
        await labels.update(owner, idParam(ctx.params.id), labelBody(values));
        return web.redirect(`${place.base}?saved=1`);
      },
      { render: editPage },
    );
    w.userGet(`${s.path}/:id/delete`, (ctx) => confirmPage(ctx, { values: {} }));
    w.userPost(
      `${s.path}/:id/delete`,
      async (ctx) => {
        const { owner, place } = await s.manage(ctx);
        const gone = await labels.remove(owner, idParam(ctx.params.id));
        return web.redirect(`${place.base}?deleted=${gone.issues}`);
      },
      { render: confirmPage },
    );
  }
}
