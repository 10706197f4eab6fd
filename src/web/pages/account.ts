/** The signed-in user's own settings: sessions (list, revoke) and password. */
import { ApiError } from '../../http/errors.ts';
import type { AuthThrottle } from '../../http/throttle.ts';
import type { UsersService } from '../../users/service.ts';
import { html } from '../html.ts';
import { field, idParam, web, type FormState, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import type { SessionsService } from '../sessions.ts';
import { actionButton, csrf, formError, input, newPasswordFields, newPasswordOf } from '../views/forms.ts';
import { timeAgo } from '../views/common.ts';
import { settingsFrame } from '../views/settings.ts';

export function accountPages(
  w: WebRouter,
  d: {
    users: Pick<UsersService, 'passwords'>;
    sessions: SessionsService;
    throttle: AuthThrottle | undefined;
  },
): void {
  const sessionsPage = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    const list = await d.sessions.list(ctx.user.id);
    const rows = list.map((s) => {
      const mine = s.id === ctx.session.id;
      const revoke = actionButton(
        `/-/settings/sessions/${s.id}/revoke`,
        ctx.formToken,
        mine ? 'Sign out' : 'Revoke',
        {
          danger: !mine,
          ariaLabel: mine
            ? 'Sign out of this session'
            : `Revoke the session started ${new Date(s.createdAt).toISOString()}`,
        },
      );
      return html`<tr>
<td>${s.userAgent === '' ? html`<span class="muted">unknown browser</span>` : s.userAgent}${mine ? html` <strong class="badge">This session</strong>` : ''}</td>
<td>${s.address}</td>
<td>${timeAgo(new Date(s.createdAt).toISOString())}</td>
<td>${timeAgo(new Date(s.lastSeenAt).toISOString())}</td>
<td>${revoke}</td>
</tr>`;
    });
    return web.page(
      'Sessions',
      settingsFrame(
        'sessions',
        html`<h1>Sessions</h1>
${formError(state)}
<p>Browsers signed in as ${ctx.user.username}. Revoking a session signs that browser out at its next request.</p>
<table class="list">
<thead><tr><th scope="col">Browser</th><th scope="col">Address</th><th scope="col">Signed in</th><th scope="col">Last active</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>${rows}</tbody>
</table>`,
      ),
    );
  };
  w.userGet('/-/settings/sessions', (ctx) => sessionsPage(ctx, { values: {} }));
  w.userPost(
    '/-/settings/sessions/:id/revoke',
    async (ctx) => {
      const id = idParam(ctx.params.id);
      await d.sessions.revoke(ctx.user.id, id);
      if (id === ctx.session.id) {
        w.cookie.clear(ctx.res);
        return web.redirect('/');
      }
      return web.redirect('/-/settings/sessions');
    },
    { render: sessionsPage },
  );

  const passwordPage = async (ctx: UserCtx, state: FormState): Promise<WebReply> => {
    const has = await d.users.passwords.has(ctx.user.id);
    const current = has
      ? input({
          name: 'current_password',
          label: 'Current password',
          type: 'password',
          required: true,
          autocomplete: 'current-password',
          maxlength: 1024,
        })
      : '';
    const done =
      ctx.query.changed === '1'
        ? html`<p class="flash ok" role="status">Your password was changed. Your other sessions were signed out.</p>`
        : '';
    return web.page(
      'Password',
      settingsFrame(
        'password',
        html`<h1>Password</h1>
${done}
${formError(state)}
<p>The password signs in to this web interface. The API and the VCS clients take access tokens instead. Changing it signs out your other sessions.</p>
<form method="post" action="/-/settings/password" class="card">
${csrf(ctx.formToken)}
<input type="text" name="username" value="${ctx.user.username}" autocomplete="username" hidden>
${current}
${newPasswordFields()}
<button type="submit" class="primary">Change password</button>
</form>`,
      ),
    );
  };
  w.form('/-/settings/password', passwordPage, async (ctx, values) => {
    const password = newPasswordOf(values);
    const current = field(values, 'current_password');
    const change = () => d.users.passwords.change(ctx.user.id, current, password, ctx.session.id);
    // guesses of the current password count in the failed-authentication throttle, as sign-ins do
    const wrong = (e: unknown) => e instanceof ApiError && e.status === 403;
    const secret = `web-current\u0000${ctx.user.id}\u0000${current}`;
    await (d.throttle === undefined ? change() : d.throttle.guard(ctx.req, change, wrong, 'user', secret));
    // this session stays, under a new id; the others ended with the change
    w.cookie.set(ctx.res, await d.sessions.renew(ctx.session.id));
    return web.redirect('/-/settings/password?changed=1');
  });
}
