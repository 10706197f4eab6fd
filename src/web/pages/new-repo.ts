/**
 * The form creating a repository in one of the user's organizations, authorised like the API's
 * `POST /api/v1/orgs/:org/repos` (organization member, `repo:write`).
 */
import { parseWith } from '../../http/input.ts';
import type { OrgsService } from '../../orgs/service.ts';
import { createRepoBody } from '../../repos/schemas.ts';
import type { ReposService } from '../../repos/service.ts';
import { html } from '../html.ts';
import { field, web, type FormState, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { checkbox, csrf, formError, input, select, textarea } from '../views/forms.ts';
import { urls } from '../urls.ts';

/**
 * The kinds in the order offered. Mercurial is checked first: it is what the API creates when a
 * request names no kind, so a repository made here without a choice is the same as one made there.
 */
const KINDS = [
  { value: 'git', label: 'Git', hint: 'the most widely used; branches and tags' },
  { value: 'hg', label: 'Mercurial', hint: 'named branches and bookmarks; the default' },
  { value: 'fossil', label: 'Fossil', hint: 'a single-file repository with its own wiki and tickets' },
] as const;
const DEFAULT_KIND = 'hg';

export function newRepoPages(w: WebRouter, d: { orgs: OrgsService; repos: ReposService }): void {
  const page = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    const orgs = await d.orgs.forUser(ctx.user.id, null, { page: 1, per_page: 100 });
    const heading = html`<h1>New repository</h1>`;
    if (orgs.items.length === 0) {
      return web.page(
        'New repository',
        html`<section class="narrow-wide">${heading}
<p class="empty">A repository belongs to an organization, and you are a member of none yet. <a href="/-/new/org">Create an organization</a> first: you become its owner and can then create its repositories here.</p>
</section>`,
      );
    }
    const wanted = field(state.values, 'org') || (ctx.query.org ?? '');
    const chosen = orgs.items.find((o) => o.name.toLowerCase() === wanted.toLowerCase())?.name;
    const kind = field(state.values, 'vcs') || DEFAULT_KIND;
    const kinds = KINDS.map(
      (k) => html`<div class="check">
<input type="radio" id="f-vcs-${k.value}" name="vcs" value="${k.value}"${k.value === kind ? html` checked` : ''}>
<label for="f-vcs-${k.value}">${k.label} <span class="muted">— ${k.hint}</span></label>
</div>`,
    );
    return web.page(
      'New repository',
      html`<section class="narrow-wide">${heading}
${formError(state)}
<form method="post" action="${urls.newRepo()}" class="card">
${csrf(ctx.formToken)}
${select({ name: 'org', label: 'Organization', value: chosen ?? orgs.items[0]!.name, options: orgs.items.map((o) => ({ value: o.name, label: o.name })) })}
${input({ name: 'name', label: 'Name', required: true, maxlength: 100, autofocus: true, hint: 'Letters, digits, ".", "_" and "-"; not starting with "." or "-". It is the last part of the clone URL.' }, state)}
${textarea({ name: 'description', label: 'Description', maxlength: 10_000 }, state)}
<fieldset>
<legend>Kind</legend>
${kinds}
<p class="hint">The kind cannot be changed later.</p>
</fieldset>
${checkbox({ name: 'is_private', label: 'Private: only members of the organization see it', checked: field(state.values, 'is_private') === 'on' })}
<button type="submit" class="primary">Create repository</button>
</form>
</section>`,
    );
  };
  w.form(urls.newRepo(), page, async (ctx, values) => {
    const org = await ctx.access.org(field(values, 'org'), { scope: 'repo:write', role: 'member' });
    const body = parseWith(
      createRepoBody,
      {
        name: field(values, 'name').trim(),
        description: field(values, 'description'),
        is_private: field(values, 'is_private') === 'on',
        vcs: field(values, 'vcs') || DEFAULT_KIND,
      },
      'form',
    );
    const repo = await d.repos.create(org, body);
    return web.redirect(urls.repo(org.name, repo.name));
  });
}
