/**
 * A repository's general settings, for the owners of its organization (as the API's `PATCH` and
 * `DELETE /api/v1/repos/:org/:repo`): its description and visibility, and deleting it once its
 * full name is typed.
 */
import { ApiError } from '../../http/errors.ts';
import { parseWith } from '../../http/input.ts';
import { updateRepoBody } from '../../repos/schemas.ts';
import type { ReposService } from '../../repos/service.ts';
import { html } from '../html.ts';
import { field, web, type FormState, type PageCtx, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { loadRepo } from '../repo-page.ts';
import { checkbox, csrf, formError, input, textarea } from '../views/forms.ts';
import { repoSettingsFrame } from '../views/repo-settings.ts';
import { urls } from '../urls.ts';

const MANAGE = { scope: 'repo:write', role: 'owner' } as const;
const DELETE = { scope: 'admin', role: 'owner' } as const;

type Deps = { repos: Pick<ReposService, 'get' | 'json' | 'update' | 'delete'> };

export function repoSettingsPages(w: WebRouter, d: Deps): void {
  const page = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
    const p = await loadRepo(ctx, d.repos, MANAGE);
    const { repo } = p;
    const full = `${repo.org}/${repo.name}`;
    // what was typed into the form that was refused; the record's values in the other
    const which = field(state.values, 'form');
    const general: FormState = which === 'general' ? state : { values: {} };
    const danger: FormState = which === 'delete' ? state : { values: {} };
    const isPrivate = which === 'general' ? field(state.values, 'is_private') === 'on' : repo.is_private;
    const saved =
      ctx.query.saved === '1' && state.error === undefined
        ? html`<p class="flash ok" role="status">The settings were saved.</p>`
        : '';
    const action = urls.settings(repo.org, repo.name);
    return web.page(
      `Settings · ${full}`,
      repoSettingsFrame(
        p,
        'general',
        html`<h1>General</h1>
${saved}
<form method="post" action="${action}" class="card">
${formError(general)}
${csrf(ctx.formToken)}
<input type="hidden" name="form" value="general">
${textarea({ name: 'description', label: 'Description', maxlength: 10_000, ...(which === 'general' ? {} : { value: repo.description }) }, general)}
${checkbox({ name: 'is_private', label: 'Private: only members of the organization see it', checked: isPrivate })}
<button type="submit" class="primary">Save</button>
</form>
<section class="danger-zone" aria-labelledby="danger-h">
<h2 id="danger-h">Danger zone</h2>
<p>Deleting <strong>${full}</strong> removes its history, issues, pull requests, releases, pipelines and webhooks. It cannot be undone.</p>
<form method="post" action="${action}/delete">
${formError(danger)}
${csrf(ctx.formToken)}
<input type="hidden" name="form" value="delete">
${input({ name: 'confirm', label: `Type ${full} to confirm`, required: true, autocomplete: 'off', maxlength: 200 }, danger)}
<button type="submit" class="danger">Delete this repository</button>
</form>
</section>`,
      ),
    );
  };
  const again = (ctx: UserCtx, state: FormState) => page(ctx, state);
  const base = '/:org/:repo/-/settings';

  w.get(base, (ctx) => page(ctx, { values: {} }));
  w.userPost(
    base,
    async (ctx, values) => {
      const { target } = await loadRepo(ctx, d.repos, MANAGE);
      const body = parseWith(
        updateRepoBody,
        { description: field(values, 'description'), is_private: field(values, 'is_private') === 'on' },
        'form',
      );
      const row = await d.repos.update(target.repo.id, body);
      return web.redirect(`${urls.settings(target.org.name, row.name)}?saved=1`);
    },
    { render: again },
  );
  w.userPost(
    `${base}/delete`,
    async (ctx, values) => {
      const { target } = await loadRepo(ctx, d.repos, DELETE);
      const full = `${target.org.name}/${target.repo.name}`;
      if (field(values, 'confirm').trim() !== full) {
        throw ApiError.validation(`The name typed is not ${full}: the repository was not deleted.`);
      }
      await d.repos.delete(target.repo.id);
      return web.redirect(urls.org(target.org.name));
    },
    { render: again },
  );
}
