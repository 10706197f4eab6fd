/**
 * The user's access tokens: the list, the form making one (its value shown once, in the answer to
 * the form), and deleting one. Made through the users service as `POST /api/v1/user/tokens` makes
 * them, from the session (which holds every scope: any scope may be granted).
 */
import { ApiError } from '../../http/errors.ts';
import { parseWith } from '../../http/input.ts';
import type { OrgsService } from '../../orgs/service.ts';
import type { ReposService } from '../../repos/service.ts';
import { createTokenBody } from '../../users/schemas.ts';
import type { UsersService } from '../../users/service.ts';
import { html, type Html } from '../html.ts';
import { field, fieldList, idParam, web, type FormState, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { formError } from '../views/forms.ts';
import { settingsFrame } from '../views/settings.ts';
import { EXPIRIES, LEVELS, newTokenBox, tokenForm, tokenList } from '../views/tokens.ts';
import { urls } from '../urls.ts';

type Deps = {
  users: Pick<UsersService, 'createToken' | 'listTokens' | 'deleteToken'>;
  orgs: Pick<OrgsService, 'forUser'>;
  repos: Pick<ReposService, 'forUser'>;
};

const DAY_MS = 86_400_000;

/** The API's token body from the form, with the form's own words for its common mistakes. */
function tokenBody(values: FormState['values']) {
  const level = field(values, 'level') || 'personal';
  if (!LEVELS.some((l) => l.value === level)) throw ApiError.validation('Choose a reach from the list.');
  const target = field(values, 'target').trim();
  if (level === 'personal' && target !== '') {
    throw ApiError.validation(
      'A personal token reaches everything you can reach: leave the target empty, or choose the organization or repository reach.',
    );
  }
  if (level !== 'personal' && target === '') {
    throw ApiError.validation(
      level === 'org'
        ? 'An organization token needs a target: the name of the organization.'
        : 'A repository token needs a target: the repository as "organization/repository".',
    );
  }
  const expires = field(values, 'expires') || '30';
  if (!EXPIRIES.some((e) => e.value === expires))
    throw ApiError.validation('Choose an expiry from the list.');
  const scopes = fieldList(values, 'scopes');
  if (scopes.length === 0) throw ApiError.validation('Choose at least one scope.');
  return parseWith(
    createTokenBody,
    {
      name: field(values, 'name'),
      scopes,
      level,
      ...(level === 'personal' ? {} : { target }),
      expires_at: expires === 'never' ? null : new Date(Date.now() + Number(expires) * DAY_MS).toISOString(),
    },
    'form',
  );
}

export function tokenPages(w: WebRouter, d: Deps): void {
  /** The page: `made` is the token just created, shown once. */
  const page = async (ctx: UserCtx, state: FormState, made?: Html): Promise<WebReply> => {
    const reach = { ...ctx.access.listReach(), userId: ctx.user.id };
    const [tokens, orgs, repos] = await Promise.all([
      d.users.listTokens(ctx.user.id, { page: 1, per_page: 100 }),
      d.orgs.forUser(ctx.user.id, null, { page: 1, per_page: 100 }),
      d.repos.forUser(reach, {}, { page: 1, per_page: 100 }),
    ]);
    const targets = [...orgs.items.map((o) => o.name), ...repos.items.map((r) => `${r.org}/${r.name}`)];
    const more =
      tokens.total > tokens.items.length
        ? html`<p class="hint">The ${tokens.items.length} oldest of your ${tokens.total} tokens are shown.</p>`
        : '';
    return web.page(
      'Access tokens',
      settingsFrame(
        'tokens',
        html`<h1>Access tokens</h1>
${made}
<p>Tokens let the API and the Git, Mercurial and Fossil clients act as ${ctx.user.username}, limited to their scopes and reach. Your password works only in this web interface.</p>
<section aria-labelledby="tokens-h">
<h2 id="tokens-h">Your tokens</h2>
${tokenList(tokens.items, ctx.formToken)}
${more}
</section>
<section aria-labelledby="new-token-form-h">
<h2 id="new-token-form-h">New token</h2>
${formError(state)}
${tokenForm(ctx.formToken, state, targets)}
</section>`,
      ),
      { scripts: ['copy', 'tokens'] },
    );
  };
  const again = (ctx: UserCtx, state: FormState) => page(ctx, state);

  w.userGet(urls.tokens, (ctx) => page(ctx, { values: {} }));
  w.userPost(
    urls.tokens,
    async (ctx, values) => {
      const body = tokenBody(values);
      const made = await d.users.createToken(ctx.user.id, body).catch((e: unknown) => {
        // an unknown target (or one of an organization the user is not in) is the form's mistake
        if (e instanceof ApiError && e.status === 404) throw ApiError.validation(`Target: ${e.message}.`);
        throw e;
      });
      // the answer holds the token's value: no cache keeps it
      ctx.res.setHeader('Cache-Control', 'no-store');
      return page(ctx, { values: {} }, newTokenBox(made.name, made.token));
    },
    { render: again },
  );
  w.userPost(
    `${urls.tokens}/:id/delete`,
    async (ctx) => {
      await d.users.deleteToken(ctx.user.id, idParam(ctx.params.id));
      return web.redirect(urls.tokens);
    },
    { render: again },
  );
}
