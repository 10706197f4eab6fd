/**
 * An organization's members: the list for its members (as `GET /api/v1/orgs/:org/members`), and
 * for its owners adding a member, changing a role and removing one (as the API's `PUT` and
 * `DELETE /members/:username`: owner with the admin scope; the last owner stays).
 */
import { ApiError } from '../../http/errors.ts';
import { parseWith } from '../../http/input.ts';
import { memberBody, ROLES, type MemberJson } from '../../orgs/schemas.ts';
import type { OrgsService } from '../../orgs/service.ts';
import type { UsersService } from '../../users/service.ts';
import { html, type Html } from '../html.ts';
import { field, web, type FormState, type PageCtx, type UserCtx, type WebReply } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { actionButton, csrf, formError, input, select } from '../views/forms.ts';
import { pageParam, pager } from '../views/common.ts';
import { orgHeader } from '../views/org.ts';
import { urls } from '../urls.ts';

const PER_PAGE = 100;
const OWNER = { scope: 'admin', role: 'owner' } as const;
const ROLE_OPTIONS = ROLES.map((r) => ({ value: r, label: r === 'owner' ? 'Owner' : 'Member' }));

type Deps = {
  orgs: Pick<OrgsService, 'members' | 'setMember' | 'removeMember' | 'role'>;
  users: Pick<UsersService, 'findByUsername'>;
};

function roleForm(org: string, m: MemberJson, formToken: string): Html {
  const u = m.user.username;
  const id = `role-${u}`;
  return html`<form method="post" action="${urls.orgMembers(org)}/${encodeURIComponent(u)}/role" class="row-form">
${csrf(formToken)}
<label for="${id}" class="visually-hidden">Role of ${u}</label>
<select id="${id}" name="role">${ROLE_OPTIONS.map((o) => html`<option value="${o.value}"${o.value === m.role ? html` selected` : ''}>${o.label}</option>`)}</select>
<button type="submit" class="secondary" aria-label="Change role of ${u}">Change role</button>
</form>`;
}

function memberRows(
  org: string,
  items: readonly MemberJson[],
  viewer: string | undefined,
  owner: boolean,
  formToken: string | undefined,
): Html {
  return html`${items.map((m) => {
    const u = m.user.username;
    const you = u.toLowerCase() === viewer?.toLowerCase() ? html` <span class="badge">you</span>` : '';
    const controls =
      owner && formToken !== undefined
        ? html`<td>${roleForm(org, m, formToken)}</td>
<td>${actionButton(`${urls.orgMembers(org)}/${encodeURIComponent(u)}/remove`, formToken, 'Remove', { danger: true, ariaLabel: `Remove ${u} from ${org}` })}</td>`
        : html`<td>${m.role === 'owner' ? 'Owner' : 'Member'}</td>`;
    return html`<tr>
<th scope="row"><a href="${urls.user(u)}">${u}</a>${you}</th>
<td>${m.user.display_name}</td>
${controls}
</tr>`;
  })}`;
}

export function memberPages(w: WebRouter, d: Deps): void {
  const page = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
    const org = await ctx.access.org(ctx.params.org ?? '', { role: 'member' });
    const role = await ctx.access.roleIn(org.id);
    const owner = role === 'owner';
    const n = pageParam(ctx.query.page);
    const list = await d.orgs.members(org.id, { page: n, per_page: PER_PAGE });
    const head = owner
      ? html`<th scope="col">Role</th><th scope="col"><span class="visually-hidden">Remove</span></th>`
      : html`<th scope="col">Role</th>`;
    const add =
      owner && ctx.formToken !== undefined
        ? html`<section aria-labelledby="add-h">
<h2 id="add-h">Add a member</h2>
<form method="post" action="${urls.orgMembers(org.name)}" class="card add-member">
${csrf(ctx.formToken)}
${input({ name: 'username', label: 'Username', required: true, maxlength: 64, autocomplete: 'off' }, state)}
${select({ name: 'role', label: 'Role', value: field(state.values, 'role') || 'member', options: ROLE_OPTIONS, hint: 'Owners manage members, settings and webhooks and may delete repositories; members create repositories and push.' })}
<button type="submit" class="primary">Add member</button>
</form>
</section>`
        : '';
    return web.page(
      `Members · ${org.name}`,
      html`${orgHeader(org.name, role, 'members')}
<h1>Members</h1>
${formError(state)}
<table class="list members">
<thead><tr><th scope="col">Username</th><th scope="col">Name</th>${head}</tr></thead>
<tbody>${memberRows(org.name, list.items, ctx.user?.username, owner, ctx.formToken)}</tbody>
</table>
${pager(ctx.path, n, PER_PAGE, list.total)}
${add}`,
    );
  };
  const again = (ctx: UserCtx, state: FormState) => page(ctx, state);
  const base = '/:org/-/members';

  w.get(base, (ctx) => page(ctx, { values: {} }));
  w.userPost(
    base,
    async (ctx, values) => {
      const org = await ctx.access.org(ctx.params.org ?? '', OWNER);
      const username = field(values, 'username').trim();
      const { role } = parseWith(memberBody, { role: field(values, 'role') }, 'form');
      const user = username === '' ? undefined : await d.users.findByUsername(username);
      if (user === undefined) throw ApiError.validation(`There is no user "${username}".`);
      if ((await d.orgs.role(org.id, user.id)) !== undefined) {
        throw ApiError.conflict(`${user.username} is a member already: change their role in the list.`);
      }
      await d.orgs.setMember(org.id, user.id, role);
      return web.redirect(urls.orgMembers(org.name));
    },
    { render: again },
  );
  /** The organization (its owner asking) and the member a row's form names. */
  const rowTarget = async (ctx: UserCtx) => {
    const org = await ctx.access.org(ctx.params.org ?? '', OWNER);
    const user = await d.users.findByUsername(ctx.params.username ?? '');
    if (user === undefined) throw ApiError.notFound('member');
    return { org, user };
  };
  w.userPost(
    `${base}/:username/role`,
    async (ctx, values) => {
      const { org, user } = await rowTarget(ctx);
      const { role } = parseWith(memberBody, { role: field(values, 'role') }, 'form');
      await d.orgs.setMember(org.id, user.id, role);
      return web.redirect(urls.orgMembers(org.name));
    },
    { render: again },
  );
  w.userPost(
    `${base}/:username/remove`,
    async (ctx) => {
      const { org, user } = await rowTarget(ctx);
      await d.orgs.removeMember(org.id, user.id);
      // who removed themself is no member any more: their organization's page instead
      return web.redirect(user.id === ctx.user.id ? urls.org(org.name) : urls.orgMembers(org.name));
    },
    { render: again },
  );
}
