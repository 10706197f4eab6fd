/**
 * The views of webhooks, the same for a repository's and an organization's (a `HookPlace` says
 * whose and where): the list, the form (new and edit), the recent deliveries and one delivery's
 * request and response.
 */
import type { HookOwner } from '../../webhooks/service.ts';
import {
  DISABLED_ENTRY,
  EVENT_NAMES,
  type DeliveryDetailJson,
  type DeliveryJson,
  type WebhookJson,
} from '../../webhooks/schemas.ts';
import { html, type Html, type Renderable } from '../html.ts';
import { field, fieldList, type FormState } from '../context.ts';
import { urls } from '../urls.ts';
import { actionButton, checkbox, csrf, input } from './forms.ts';
import { timeAgo } from './common.ts';

/** Whose webhooks a page shows, and where: the list's URL, the name shown, the page's frame. */
export type HookPlace = {
  owner: HookOwner;
  /** The list's URL; a webhook's page is `urls.webhook(base, id)`. */
  base: string;
  /** `org/repo` or `org`. */
  name: string;
  what: 'repository' | 'organization';
  frame: (body: Renderable) => Html;
};

/** The event types by area, as the form groups them. */
const AREAS = [
  { label: 'Code', test: (e: string) => !/^(issue|pull_request)(\.|$)/.test(e) },
  { label: 'Issues', test: (e: string) => /^issue(\.|$)/.test(e) },
  { label: 'Pull requests', test: (e: string) => /^pull_request(\.|$)/.test(e) },
];

/**
 * The event boxes of a form: the current variant's names, or for a webhook created in the earlier
 * API variant its own (`push`, `issue`, `pull_request`), which it keeps.
 */
function eventGroups(chosen: readonly string[], names: readonly string[]): Html {
  const groups = AREAS.map((a, i) => {
    const boxes = names.filter(a.test).map((e) =>
      checkbox({
        name: 'events',
        value: e,
        id: `f-event-${e.replace('.', '-')}`,
        checked: chosen.includes(e),
        label: html`<code>${e}</code>`,
      }),
    );
    return html`<div class="scope-group" role="group" aria-labelledby="events-${i}"><p class="scope-area" id="events-${i}">${a.label}</p>${boxes}</div>`;
  });
  return html`<fieldset>
<legend>Events</legend>
<div class="scope-grid">${groups}</div>
</fieldset>`;
}

/** The form of a new webhook (`hook` undefined) or of one to change; `state` holds a refused form's values. */
export function hookForm(action: string, formToken: string, state: FormState, hook?: WebhookJson): Html {
  const refused = field(state.values, 'form') === 'hook';
  const url = refused ? field(state.values, 'url') : (hook?.url ?? '');
  const events = refused ? fieldList(state.values, 'events') : (hook?.events ?? ['push']);
  const active = refused ? field(state.values, 'is_active') === 'on' : (hook?.is_active ?? true);
  const secretHint =
    hook === undefined
      ? 'Optional. Each delivery is signed with it (X-Svc-Signature-256 and the Standard Webhooks headers) so the receiver can check it came from here.'
      : hook.has_secret
        ? 'A secret is set. Leave this empty to keep it.'
        : 'No secret is set. Leave this empty to keep it that way.';
  const remove =
    hook?.has_secret === true
      ? checkbox({
          name: 'remove_secret',
          label: 'Remove the secret',
          checked: refused && field(state.values, 'remove_secret') === 'on',
        })
      : '';
  return html`<form method="post" action="${action}" class="card hook-form">
${csrf(formToken)}
<input type="hidden" name="form" value="hook">
${input({ name: 'url', label: 'Payload URL', type: 'url', required: true, maxlength: 2048, value: url, placeholder: 'https://example.com/hooks/triad', hint: 'Deliveries are POSTed here as JSON.' })}
${eventGroups(events, EVENT_NAMES[hook?.api_variant ?? 'current'])}
${input({ name: 'secret', label: 'Secret', type: 'password', maxlength: 256, autocomplete: 'new-password', hint: secretHint })}
${remove}
${checkbox({ name: 'is_active', label: 'Active: deliver events', checked: active })}
<button type="submit" class="primary">${hook === undefined ? 'Add webhook' : 'Save webhook'}</button>
</form>`;
}

function state(h: WebhookJson): Html {
  if (h.is_active) return html`<span class="badge ok">Active</span>`;
  return h.disabled_reason === null
    ? html`<span class="badge">Inactive</span>`
    : html`<span class="badge failed" title="${h.disabled_reason}">Disabled</span>`;
}

function lastDelivery(h: WebhookJson): Html {
  const d = h.last_delivery;
  if (d === null) return html`<span class="muted">none yet</span>`;
  return html`${result(d.success, d.response_code)} ${timeAgo(d.delivered_at)}`;
}

function result(success: boolean, code: number): Html {
  const text = code === 0 ? 'no response' : String(code);
  return success
    ? html`<span class="badge ok">${text}</span>`
    : html`<span class="badge failed">${text}</span>`;
}

export function hookList(place: HookPlace, hooks: readonly WebhookJson[]): Html {
  if (hooks.length === 0) return html`<p class="empty">This ${place.what} has no webhooks.</p>`;
  const rows = hooks.map(
    (h) => html`<tr>
<th scope="row"><a href="${urls.webhook(place.base, h.id)}" class="break">${h.url}</a></th>
<td>${h.events.join(', ')}</td>
<td>${state(h)}</td>
<td>${lastDelivery(h)}</td>
</tr>`,
  );
  return html`<div class="table-scroll"><table class="list">
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Last delivery</th></tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
}

function deliveryLabel(d: DeliveryJson): string {
  return `${d.event_type} delivery ${d.delivery_id.slice(0, 8)} attempt ${d.attempt}`;
}

export function deliveryTable(
  place: HookPlace,
  hookId: number,
  items: readonly DeliveryJson[],
  formToken: string,
): Html {
  if (items.length === 0) return html`<p class="empty">No deliveries yet. Ping the webhook to send one.</p>`;
  const rows = items.map((d) => {
    const entry = d.event_type === DISABLED_ENTRY;
    const at = urls.delivery(place.base, hookId, d.id);
    const redeliver = entry
      ? ''
      : actionButton(`${at}/redeliver`, formToken, 'Redeliver', {
          ariaLabel: `Redeliver the ${deliveryLabel(d)}`,
        });
    return html`<tr>
<th scope="row"><a href="${at}" aria-label="Details of the ${deliveryLabel(d)}"><code>${d.event_type}</code></a>${d.redelivery ? html` <span class="badge">redelivery</span>` : ''}</th>
<td>${entry ? html`<span class="badge failed">disabled</span>` : result(d.success, d.response_code)}${d.error === null ? '' : html` <span class="muted">${d.error}</span>`}</td>
<td>${d.attempt}</td>
<td>${timeAgo(d.delivered_at)}</td>
<td>${entry ? '' : `${d.duration_ms} ms`}</td>
<td>${redeliver}</td>
</tr>`;
  });
  return html`<div class="table-scroll"><table class="list deliveries">
<thead><tr><th scope="col">Event</th><th scope="col">Result</th><th scope="col">Attempt</th><th scope="col">Delivered</th><th scope="col">Duration</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
}

function headerText(h: Record<string, string>): string {
  return Object.entries(h)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');
}

/** A body as sent: JSON indented for reading, anything else as it is. */
function bodyText(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

export function deliveryDetail(d: DeliveryDetailJson): Html {
  const facts: [string, Renderable][] = [
    ['Event', html`<code>${d.event_type}</code>`],
    ['Delivery', html`<code>${d.delivery_id}</code>`],
    ['Attempt', `${d.attempt}${d.redelivery ? ' (redelivery)' : ''}`],
    [
      'Result',
      d.event_type === DISABLED_ENTRY ? 'the webhook was disabled' : result(d.success, d.response_code),
    ],
    ['Delivered', timeAgo(d.delivered_at)],
    ['Duration', `${d.duration_ms} ms`],
    ['Error', d.error ?? html`<span class="muted">none</span>`],
  ];
  const req = d.request;
  const res = d.response;
  return html`<dl class="facts">${facts.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
<section aria-labelledby="req-h">
<h2 id="req-h">Request</h2>
${
  req === null
    ? html`<p class="empty">This entry records a change of the webhook, not a delivery.</p>`
    : html`<p>POST <code class="break">${req.url}</code></p>
<h3>Headers</h3>
<pre class="payload" tabindex="0" role="region" aria-label="Request headers">${headerText(req.headers)}</pre>
<h3>Body</h3>
<pre class="payload" tabindex="0" role="region" aria-label="Request body">${bodyText(req.body)}</pre>`
}
</section>
<section aria-labelledby="res-h">
<h2 id="res-h">Response</h2>
${
  res === null
    ? html`<p class="empty">No response arrived.</p>`
    : html`<h3>Headers</h3>
<pre class="payload" tabindex="0" role="region" aria-label="Response headers">${headerText(res.headers)}</pre>
<h3>Body</h3>
<pre class="payload" tabindex="0" role="region" aria-label="Response body">${res.body === '' ? '(empty)' : res.body}</pre>`
}
</section>`;
}
