/**
 * A user's public profile: what `GET /api/v1/users/:username` answers (no e-mail address, no
 * administrator flag), and for the user themself links to their settings.
 */
import type { UsersService } from '../../users/service.ts';
import { isoTime } from '../../db/sql.ts';
import { html } from '../html.ts';
import { web } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { errorPage } from '../web.ts';
import { timeAgo } from '../views/common.ts';
import { urls } from '../urls.ts';

export function profilePages(w: WebRouter, d: { users: Pick<UsersService, 'findByUsername'> }): void {
  w.get('/-/users/:username', async (ctx) => {
    const user = await d.users.findByUsername(ctx.params.username ?? '');
    if (user === undefined) return errorPage(404, 'no such user');
    const joined = isoTime(user.createdAt);
    const self = ctx.user?.id === user.id;
    const own = self
      ? html`<section aria-labelledby="own-h" class="profile-own">
<h2 id="own-h">Your settings</h2>
<ul class="plain">
<li><a href="${urls.tokens}">Access tokens</a></li>
<li><a href="/-/settings/sessions">Sessions</a></li>
<li><a href="/-/settings/password">Password</a></li>
</ul>
</section>`
      : '';
    return web.page(
      user.username,
      html`<section class="profile">
<div class="avatar" aria-hidden="true">${([...(user.displayName || user.username)][0] ?? '').toUpperCase()}</div>
<div>
<h1>${user.displayName}</h1>
<p class="profile-handle">${user.username}</p>
<p class="meta">Joined ${timeAgo(joined)} (${joined.slice(0, 10)})</p>
</div>
</section>
${own}`,
    );
  });
}
