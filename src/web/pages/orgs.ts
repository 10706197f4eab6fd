/** Organizations: the form creating one, and an organization's page (its repositories). */
import { parseWith } from '../../http/input.ts';
import { createOrgBody } from '../../orgs/schemas.ts';
import type { OrgsService } from '../../orgs/service.ts';
import type { ReposService } from '../../repos/service.ts';
import { html } from '../html.ts';
import { field, web, type FormState, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { csrf, formError, input, textarea } from '../views/forms.ts';
import { pageParam, pager, repoList } from '../views/common.ts';
import { urls } from '../urls.ts';

const PER_PAGE = 50;

/** What only the organization's owners manage: its labels and webhooks. */
const ownerLinks = (org: string) => html`<a class="button subtle" href="${urls.orgLabels(org)}">Labels</a>
<a class="button subtle" href="${urls.orgWebhooks(org)}">Webhooks</a>`;

export function orgPages(w: WebRouter, d: { orgs: OrgsService; repos: ReposService }): void {
  const newOrgPage = (ctx: UserCtx, state: FormState): Promise<WebReply> =>
    Promise.resolve(
      web.page(
        'New organization',
        html`<section class="narrow-wide">
<h1>New organization</h1>
${formError(state)}
<form method="post" action="/-/new/org" class="card">
${csrf(ctx.formToken)}
${input({ name: 'name', label: 'Name', required: true, maxlength: 64, autofocus: true, hint: 'Letters, digits, ".", "_" and "-", not at either end. It is the first part of its repositories\' addresses.' }, state)}
${textarea({ name: 'description', label: 'Description', maxlength: 10_000 }, state)}
<button type="submit" class="primary">Create organization</button>
</form>
<p class="hint">You become its owner: you add members and give them roles on its Members page.</p>
</section>`,
      ),
    );
  w.form('/-/new/org', newOrgPage, async (ctx, values) => {
    const body = parseWith(
      createOrgBody,
      { name: field(values, 'name').trim(), description: field(values, 'description') },
      'form',
    );
    const org = await d.orgs.create(ctx.user.id, body, { capped: !ctx.user.isAdmin });
    return web.redirect(urls.org(org.name));
  });

  w.get('/:org', async (ctx) => {
    const org = await ctx.access.org(ctx.params.org ?? '');
    const row = await d.orgs.get(org.name);
    const page = pageParam(ctx.query.page);
    const shown = await ctx.access.privateReposShown(org.id);
    const list = await d.repos.listForOrg(org, shown, { page, per_page: PER_PAGE });
    const role = await ctx.access.roleIn(org.id);
    const actions =
      role === undefined
        ? ''
        : html`<div class="actions">
<a class="button primary" href="/-/new/repo?org=${encodeURIComponent(org.name)}">New repository</a>
<a class="button subtle" href="${urls.orgMembers(org.name)}">Members</a>
${role === 'owner' ? ownerLinks(org.name) : ''}
</div>`;
    return web.page(
      org.name,
      html`<div class="heading-row"><h1>${org.name}</h1>${actions}</div>
${row.description === '' ? '' : html`<p class="description">${row.description}</p>`}
<section aria-labelledby="repos-h">
<h2 id="repos-h">Repositories</h2>
${repoList(list.items, 'This organization has no repositories you can see.')}
${pager(ctx.path, page, PER_PAGE, list.total)}
</section>`,
    );
  });
}
