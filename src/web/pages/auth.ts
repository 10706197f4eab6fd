/**
 * Signing in and out, and setting a password through a one-time link. Failed sign-ins count in
 * the server's failed-authentication throttle, per client address (429 once it blocks).
 */
import { ApiError } from '../../http/errors.ts';
import type { AuthThrottle } from '../../http/throttle.ts';
import type { UsersService } from '../../users/service.ts';
import { html } from '../html.ts';
import { safeReturn } from '../layout.ts';
import { field, web, type FormState, type PageCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import type { SessionsService } from '../sessions.ts';
import { formError, input, newPasswordFields, newPasswordOf } from '../views/forms.ts';

class SignInFailed extends Error {}

type Deps = {
  users: Pick<UsersService, 'passwords'>;
  sessions: SessionsService;
  throttle: AuthThrottle | undefined;
};

function loginPage(ctx: PageCtx, state: FormState): Promise<WebReply> {
  const returnTo = safeReturn(field(state.values, 'return_to') || ctx.query.return_to);
  const login = input(
    {
      name: 'login',
      label: 'Username or e-mail address',
      required: true,
      autocomplete: 'username',
      autofocus: true,
      maxlength: 255,
    },
    state,
  );
  const password = input({
    name: 'password',
    label: 'Password',
    type: 'password',
    required: true,
    autocomplete: 'current-password',
    maxlength: 1024,
  });
  return Promise.resolve(
    web.page(
      'Sign in',
      html`<section class="narrow card">
<h1>Sign in to Triad</h1>
${formError(state)}
<form method="post" action="/-/login">
<input type="hidden" name="return_to" value="${returnTo}">
${login}
${password}
<button type="submit" class="primary">Sign in</button>
</form>
<p class="hint">No password yet? An administrator sets one, or gives you a one-time link to set it. The API and the VCS clients take access tokens, which you make under your account menu once signed in.</p>
</section>`,
    ),
  );
}

export function authPages(w: WebRouter, d: Deps): void {
  /** A new session id at every sign-in: the session this browser had ends first. */
  const endOld = async (ctx: PageCtx) => {
    const old = w.cookie.read(ctx.req);
    if (old !== undefined) await d.sessions.endByCookie(old);
  };
  w.get('/-/login', (ctx) =>
    ctx.user !== undefined
      ? Promise.resolve(web.redirect(safeReturn(ctx.query.return_to)))
      : loginPage(ctx, { values: {} }),
  );
  w.anonPost(
    '/-/login',
    async (ctx, values) => {
      const login = field(values, 'login').trim();
      const password = field(values, 'password');
      const check = async () => {
        const user = await d.users.passwords.signIn(login, password);
        if (user === undefined) throw new SignInFailed();
        return user;
      };
      // each login and password tried counts as one credential in the throttle
      const secret = `web\u0000${login.toLowerCase()}\u0000${password}`;
      let user;
      try {
        user =
          d.throttle === undefined
            ? await check()
            : await d.throttle.guard(ctx.req, check, (e) => e instanceof SignInFailed, 'user', secret);
      } catch (e) {
        if (!(e instanceof SignInFailed)) throw e;
        const again = {
          values: { login, return_to: field(values, 'return_to') },
          error: 'The username or password is not right.',
        };
        const page = await loginPage(ctx, again);
        return page.kind === 'page' ? { ...page, status: 401 } : page;
      }
      await endOld(ctx);
      await w.signIn(ctx, user);
      return web.redirect(safeReturn(field(values, 'return_to')));
    },
    loginPage,
  );
  w.router.get('/-/logout', (_req, res) => res.redirect(303, '/'));
  w.userPost('/-/logout', async (ctx) => {
    const cookie = w.cookie.read(ctx.req);
    if (cookie !== undefined) await d.sessions.endByCookie(cookie);
    w.cookie.clear(ctx.res);
    return web.redirect('/');
  });

  const setPage = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
    const token = field(state.values, 'token') || (ctx.query.token ?? '');
    const user = token === '' ? undefined : await d.users.passwords.linkUser(token);
    if (user === undefined) throw new ApiError(404, 'not_found', 'this link is unknown, used or expired');
    return web.page(
      'Set your password',
      html`<section class="narrow card">
<h1>Set the password of ${user.username}</h1>
${formError(state)}
<form method="post" action="/-/password/set">
<input type="hidden" name="token" value="${token}">
<input type="text" name="username" value="${user.username}" autocomplete="username" hidden>
${newPasswordFields()}
<button type="submit" class="primary">Set password and sign in</button>
</form>
<p class="hint">This link works once. Setting the password ends every other session of ${user.username}.</p>
</section>`,
    );
  };
  w.get('/-/password/set', (ctx) => setPage(ctx, { values: {} }));
  w.anonPost(
    '/-/password/set',
    async (ctx, values) => {
      const user = await d.users.passwords.useLink(field(values, 'token'), newPasswordOf(values));
      await endOld(ctx);
      await w.signIn(ctx, user);
      return web.redirect('/');
    },
    setPage,
  );
}
