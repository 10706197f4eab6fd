/**
 * Protected branches and bookmarks of a repository (`/:org/:repo/-/settings/protections`): the
 * rules with a form adding one and a button deleting each, for the organization's owners (as the
 * API: owner with the admin scope).
 */
import { parseWith } from '../../http/input.ts';
import { createProtectionBody } from '../../protection/schemas.ts';
import type { ProtectionsService } from '../../protection/service.ts';
import type { ProtectionRule } from '../../protection/rules.ts';
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
import { actionButton, checkbox, csrf, formError, input, select } from '../views/forms.ts';
import { repoSettingsFrame } from '../views/repo-settings.ts';
import { urls } from '../urls.ts';

const MANAGE = { scope: 'admin', role: 'owner' } as const;

type Deps = {
  protections: Pick<ProtectionsService, 'list' | 'create' | 'remove'>;
  repos: Pick<ReposService, 'get' | 'json'>;
};

/** A comma- or space-separated form field as a list. */
const listOf = (v: string): string[] => v.split(/[\s,]+/).filter((x) => x !== '');

function who(push: ProtectionRule['push']): string {
  if (push === 'owners') return 'organization owners';
  if (push === 'members') return 'organization members';
  return push.users.length === 0 ? 'nobody' : push.users.join(', ');
}

function ruleRow(base: string, token: string, r: ProtectionRule): Html {
  const checks = [...(r.require_pipeline ? ['pipeline'] : []), ...r.required_contexts];
  return html`<tr>
<td><code>${r.pattern}</code></td>
<td>${who(r.push)}</td>
<td>${r.fast_forward_only ? 'yes' : 'no'}</td>
<td>${r.allow_deletion ? 'yes' : 'no'}</td>
<td>${checks.length === 0 ? 'none' : checks.join(', ')}</td>
<td>${actionButton(`${base}/${r.id}/delete`, token, 'Delete', { danger: true, ariaLabel: `Delete the rule ${r.pattern}` })}</td>
</tr>`;
}

function ruleForm(base: string, token: string, state: FormState): Html {
  const sent = Object.keys(state.values).length > 0;
  const on = (name: string, byDefault: boolean) => (sent ? field(state.values, name) === 'on' : byDefault);
  return html`<form method="post" action="${base}" class="card">
${csrf(token)}
${input({ name: 'pattern', label: 'Branch or bookmark pattern', required: true, maxlength: 255, placeholder: 'main, release/*, @', hint: '* matches within one /-separated segment, ** across segments' }, state)}
${select({
  name: 'push',
  label: 'Who may push',
  value: sent ? field(state.values, 'push') : 'members',
  options: [
    { value: 'members', label: 'Organization members' },
    { value: 'owners', label: 'Organization owners' },
    { value: 'users', label: 'Only the users named below' },
  ],
})}
${input({ name: 'users', label: 'Users who may push (when only named users may)', maxlength: 2000, placeholder: 'ada, grace' }, state)}
${checkbox({ name: 'fast_forward_only', label: 'Fast-forward only: refuse pushes that rewrite history', checked: on('fast_forward_only', true) })}
${checkbox({ name: 'allow_deletion', label: 'Allow deletion', checked: on('allow_deletion', false) })}
${checkbox({ name: 'require_pipeline', label: 'Require a passing pipeline before a pull request merges', checked: on('require_pipeline', false) })}
${input({ name: 'required_contexts', label: 'Required status contexts', maxlength: 2000, placeholder: 'ci/lint, deploy/preview' }, state)}
<button type="submit" class="primary">Add rule</button>
</form>`;
}

export function protectionPages(w: WebRouter, d: Deps): void {
  const path = '/:org/:repo/-/settings/protections';
  const page = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
    const p = await loadRepo(ctx, d.repos, MANAGE);
    const base = `${urls.settings(p.repo.org, p.repo.name)}/protections`;
    const rules = await d.protections.list(p.target);
    const token = ctx.formToken ?? '';
    const table =
      rules.length === 0
        ? html`<p class="empty">No branch or bookmark is protected.</p>`
        : html`<table class="list">
<thead><tr><th scope="col">Pattern</th><th scope="col">Who may push</th><th scope="col">Fast-forward only</th><th scope="col">Deletion allowed</th><th scope="col">Required checks</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${rules.map((r) => ruleRow(base, token, r))}</tbody>
</table>`;
    return web.page(
      `Protected refs · ${p.repo.org}/${p.repo.name}`,
      repoSettingsFrame(
        p,
        'protections',
        html`<h1>Protected branches and bookmarks</h1>
<p>Pushes and pull request merges that move a matching branch or bookmark must follow its rules; the client shows why one is refused.</p>
${table}
<section aria-labelledby="new-rule-h">
<h2 id="new-rule-h">Add a rule</h2>
${formError(state)}
${ruleForm(base, token, state)}
</section>`,
      ),
    );
  };
  const again = (ctx: UserCtx, state: FormState) => page(ctx, state);

  w.get(path, (ctx) => page(ctx, { values: {} }));
  w.userPost(
    path,
    async (ctx, values) => {
      const p = await loadRepo(ctx, d.repos, MANAGE);
      const push = field(values, 'push');
      const body = parseWith(
        createProtectionBody,
        {
          pattern: field(values, 'pattern'),
          push: push === 'users' ? { users: listOf(field(values, 'users')) } : push,
          fast_forward_only: field(values, 'fast_forward_only') === 'on',
          allow_deletion: field(values, 'allow_deletion') === 'on',
          require_pipeline: field(values, 'require_pipeline') === 'on',
          required_contexts: listOf(field(values, 'required_contexts')),
        },
        'form',
      );
      await d.protections.create(p.target, body);
      return web.redirect(`${urls.settings(p.repo.org, p.repo.name)}/protections`);
    },
    { render: again },
  );
  w.userPost(
    `${path}/:id/delete`,
    async (ctx) => {
      const p = await loadRepo(ctx, d.repos, MANAGE);
      await d.protections.remove(p.target, idParam(ctx.params.id));
      return web.redirect(`${urls.settings(p.repo.org, p.repo.name)}/protections`);
    },
    { render: again },
  );
}
