/**
 * Webhooks of a repository (`/:org/:repo/-/settings/webhooks`) and of an organization
 * (`/:org/-/settings/webhooks`): the same pages under the two places, for the organization's
 * owners (as the API: owner with the admin scope). The list with a form adding one, a webhook's
 * page (its form, ping, delete, the recent deliveries with redelivery), and one delivery.
 */
import { parseWith } from '../../http/input.ts';
import type { ReposService } from '../../repos/service.ts';
import { createWebhookBody, updateWebhookBody } from '../../webhooks/schemas.ts';
import { MAX_WEBHOOKS_PER_OWNER, type WebhooksService } from '../../webhooks/service.ts';
import { html } from '../html.ts';
import {
  field,
  fieldList,
  idParam,
  web,
  type FormState,
  type PageCtx,
  type UserCtx,
  type WebReply,
} from '../context.ts';
import type { WebRouter } from '../web.ts';
import { loadRepo } from '../repo-page.ts';
import { actionButton, formError } from '../views/forms.ts';
import { orgHeader } from '../views/org.ts';
import { repoSettingsFrame } from '../views/repo-settings.ts';
import { deliveryDetail, deliveryTable, hookForm, hookList, type HookPlace } from '../views/webhooks.ts';
import { urls } from '../urls.ts';

const MANAGE = { scope: 'admin', role: 'owner' } as const;

type Deps = {
  webhooks: WebhooksService;
  repos: Pick<ReposService, 'get' | 'json'>;
};

/** The two places webhooks live: the path of their list and how a request's place is loaded. */
function places(d: Deps): { path: string; load: (ctx: PageCtx) => Promise<HookPlace> }[] {
  return [
    {
      path: '/:org/:repo/-/settings/webhooks',
      load: async (ctx) => {
        const p = await loadRepo(ctx, d.repos, MANAGE);
        return {
          owner: p.target,
          base: urls.webhooks(p.repo.org, p.repo.name),
          name: `${p.repo.org}/${p.repo.name}`,
          what: 'repository',
          frame: (body) => repoSettingsFrame(p, 'webhooks', body),
        };
      },
    },
    {
      path: '/:org/-/settings/webhooks',
      load: async (ctx) => {
        const org = await ctx.access.org(ctx.params.org ?? '', MANAGE);
        const role = await ctx.access.roleIn(org.id);
        return {
          owner: org,
          base: urls.orgWebhooks(org.name),
          name: org.name,
          what: 'organization',
          frame: (body) => html`${orgHeader(org.name, role, 'webhooks')}${body}`,
        };
      },
    },
  ];
}

const FLASHES: Record<string, string> = {
  saved: 'The webhook was saved.',
  pinged: 'A ping was queued. Its delivery shows below once it is sent: reload the page to see it.',
  redelivered: 'The delivery was queued again. The new attempt shows below once it is sent.',
};

/** The secret as the form sends it: empty keeps (or, new, sets none); `remove_secret` removes it. */
function secretOf(values: FormState['values']): { secret?: string } {
  if (field(values, 'remove_secret') === 'on') return { secret: '' };
  const s = field(values, 'secret');
  return s === '' ? {} : { secret: s };
}

export function webhookPages(w: WebRouter, d: Deps): void {
  const hooks = d.webhooks;
  for (const at of places(d)) {
    const listPage = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
      const place = await at.load(ctx);
      const list = await hooks.list(place.owner, { page: 1, per_page: MAX_WEBHOOKS_PER_OWNER });
      const scope =
        place.what === 'organization'
          ? html`<p>Webhooks of ${place.name} receive the events of every repository of the organization.</p>`
          : html`<p>Webhooks of ${place.name} receive its events. Organization webhooks receive them too.</p>`;
      return web.page(
        `Webhooks · ${place.name}`,
        place.frame(html`<h1>Webhooks</h1>
${scope}
${hookList(place, list.items)}
<section aria-labelledby="new-hook-h">
<h2 id="new-hook-h">Add a webhook</h2>
${formError(state)}
${hookForm(place.base, ctx.formToken ?? '', state)}
</section>`),
      );
    };

    const hookPage = async (ctx: PageCtx, state: FormState): Promise<WebReply> => {
      const place = await at.load(ctx);
      const id = idParam(ctx.params.id);
      const [hook, deliveries] = await Promise.all([
        hooks.get(place.owner, id),
        hooks.deliveries(place.owner, id),
      ]);
      const one = urls.webhook(place.base, id);
      const token = ctx.formToken ?? '';
      const flash =
        state.error === undefined ? Object.keys(FLASHES).find((k) => ctx.query[k] === '1') : undefined;
      const disabled =
        hook.disabled_reason === null
          ? ''
          : html`<p class="flash warn" role="status">Triad disabled this webhook: ${hook.disabled_reason}. Check the receiver, then make it active again.</p>`;
      return web.page(
        `Webhook · ${place.name}`,
        place.frame(html`<p class="crumbs"><a href="${place.base}">Webhooks</a> /</p>
<h1 class="break">${hook.url}</h1>
${flash === undefined ? '' : html`<p class="flash ok" role="status">${FLASHES[flash]}</p>`}
${formError(state)}
${disabled}
${hookForm(one, token, state, hook)}
<section aria-labelledby="deliveries-h">
<div class="heading-row section-head"><h2 id="deliveries-h">Recent deliveries</h2>${actionButton(`${one}/ping`, token, 'Ping', { ariaLabel: 'Ping this webhook' })}</div>
${deliveryTable(place, id, deliveries, token)}
</section>
<section class="danger-zone" aria-labelledby="danger-h">
<h2 id="danger-h">Delete this webhook</h2>
<p>Its queued deliveries and its history go with it.</p>
${actionButton(`${one}/delete`, token, 'Delete webhook', { danger: true })}
</section>`),
      );
    };

    const again = (ctx: UserCtx, state: FormState) => listPage(ctx, state);
    const hookAgain = (ctx: UserCtx, state: FormState) => hookPage(ctx, state);
    /** A POST below one webhook, answered by its page. */
    const hookPost = (
      suffix: string,
      act: (ctx: UserCtx, place: HookPlace, id: number, values: FormState['values']) => Promise<WebReply>,
    ) =>
      w.userPost(
        `${at.path}/:id${suffix}`,
        async (ctx, values) => act(ctx, await at.load(ctx), idParam(ctx.params.id), values),
        { render: hookAgain },
      );

    w.get(at.path, (ctx) => listPage(ctx, { values: {} }));
    w.userPost(
      at.path,
      async (ctx, values) => {
        const place = await at.load(ctx);
        const body = parseWith(
          createWebhookBody,
          {
            url: field(values, 'url'),
            events: fieldList(values, 'events'),
            is_active: field(values, 'is_active') === 'on',
            ...secretOf(values),
          },
          'form',
        );
        const hook = await hooks.create(place.owner, ctx.access.actor(), body);
        return web.redirect(urls.webhook(place.base, hook.id));
      },
      { render: again },
    );
    w.get(`${at.path}/:id`, (ctx) => hookPage(ctx, { values: {} }));
    hookPost('', async (_ctx, place, id, values) => {
      const body = parseWith(
        updateWebhookBody,
        {
          url: field(values, 'url'),
          events: fieldList(values, 'events'),
          is_active: field(values, 'is_active') === 'on',
          ...secretOf(values),
        },
        'form',
      );
      await hooks.update(place.owner, id, body);
      return web.redirect(`${urls.webhook(place.base, id)}?saved=1`);
    });
    hookPost('/ping', async (ctx, place, id) => {
      await hooks.ping(place.owner, ctx.access.actor(), id);
      return web.redirect(`${urls.webhook(place.base, id)}?pinged=1`);
    });
    hookPost('/delete', async (_ctx, place, id) => {
      await hooks.remove(place.owner, id);
      return web.redirect(place.base);
    });
    hookPost('/deliveries/:delivery/redeliver', async (ctx, place, id) => {
      await hooks.redeliver(place.owner, id, idParam(ctx.params.delivery));
      return web.redirect(`${urls.webhook(place.base, id)}?redelivered=1`);
    });
    w.get(`${at.path}/:id/deliveries/:delivery`, async (ctx) => {
      const place = await at.load(ctx);
      const id = idParam(ctx.params.id);
      const rec = await hooks.delivery(place.owner, id, idParam(ctx.params.delivery));
      const hook = await hooks.get(place.owner, id);
      return web.page(
        `Delivery · ${place.name}`,
        place.frame(html`<p class="crumbs"><a href="${place.base}">Webhooks</a> / <a href="${urls.webhook(place.base, id)}" class="break">${hook.url}</a> /</p>
<h1>Delivery of <code>${rec.event_type}</code></h1>
${deliveryDetail(rec)}`),
      );
    });
  }
}
