/** The views of the access tokens page: the list of the user's tokens and the form making one. */
import { CURRENT_SCOPES } from '../../domain/access.ts';
import type { TokenJson } from '../../users/schemas.ts';
import { html, type Html } from '../html.ts';
import { field, fieldList, type FormState } from '../context.ts';
import { urls } from '../urls.ts';
import { actionButton, checkbox, csrf, input, select } from './forms.ts';
import { timeAgo } from './common.ts';

/** The expiries offered, in days (`never`: no expiry); 30 days unless chosen otherwise. */
export const EXPIRIES = [
  { value: '7', label: '7 days' },
  { value: '30', label: '30 days' },
  { value: '90', label: '90 days' },
  { value: '365', label: '1 year' },
  { value: 'never', label: 'No expiry' },
] as const;
export const DEFAULT_EXPIRY = '30';

export const LEVELS = [
  { value: 'personal', label: 'Personal: everything you can reach' },
  { value: 'org', label: 'Organization: one organization and its repositories' },
  { value: 'repo', label: 'Repository: one repository' },
] as const;

/** The current scopes by area, for the form's groups. */
const AREAS: { label: string; prefix: string }[] = [
  { label: 'Repositories', prefix: 'repo:' },
  { label: 'Issues', prefix: 'issues:' },
  { label: 'Pull requests', prefix: 'pulls:' },
  { label: 'Releases', prefix: 'releases:' },
  { label: 'CI pipelines', prefix: 'ci:' },
  { label: 'CI agents', prefix: 'agents:' },
  { label: 'Administration', prefix: 'admin' },
];

const SCOPE_HINTS: Record<string, string> = {
  'agents:admin':
    'register, list and deregister CI agents (site administrators; what the AgentPool operator needs)',
  admin: 'everything, including deleting repositories and managing members and webhooks',
};

function scopeGroups(chosen: readonly string[]): Html {
  const groups = AREAS.map((a) => {
    const scopes = CURRENT_SCOPES.filter((s) => s.startsWith(a.prefix));
    const boxes = scopes.map((s) =>
      checkbox({
        name: 'scopes',
        value: s,
        id: `f-scope-${s.replace(':', '-')}`,
        checked: chosen.includes(s),
        label: html`<code>${s}</code>${SCOPE_HINTS[s] === undefined ? '' : html` <span class="muted">— ${SCOPE_HINTS[s]}</span>`}`,
      }),
    );
    return html`<div class="scope-group" role="group" aria-labelledby="scope-${a.prefix.replace(':', '')}"><p class="scope-area" id="scope-${a.prefix.replace(':', '')}">${a.label}</p>${boxes}</div>`;
  });
  return html`<fieldset>
<legend>Scopes</legend>
<p class="hint">A write scope includes reading the same things.</p>
<div class="scope-grid">${groups}</div>
</fieldset>`;
}

/** The form making a token; `targets` fills the target's suggestions (`org` and `org/repo`). */
export function tokenForm(formToken: string, state: FormState, targets: readonly string[]): Html {
  const level = field(state.values, 'level') || 'personal';
  const expiry = field(state.values, 'expires') || DEFAULT_EXPIRY;
  const target = input(
    {
      name: 'target',
      label: 'Target',
      maxlength: 200,
      list: 'token-targets',
      hint: 'For an organization token, the organization ("acme"); for a repository token, the repository ("acme/app"). Required for those two levels.',
    },
    state,
  );
  return html`<form method="post" action="${urls.tokens}" class="card token-form">
${csrf(formToken)}
${input({ name: 'name', label: 'Name', required: true, maxlength: 255, hint: 'What the token is for, to recognise it in this list.' }, state)}
${scopeGroups(fieldList(state.values, 'scopes'))}
${select({ name: 'level', label: 'Reach', value: level, options: LEVELS })}
<div class="token-target" data-token-target>${target}
<datalist id="token-targets">${targets.map((t) => html`<option value="${t}"></option>`)}</datalist></div>
${select({ name: 'expires', label: 'Expires', value: expiry, options: EXPIRIES, hint: 'An expired token stops working; delete it and make a new one.' })}
<button type="submit" class="primary">Create token</button>
</form>`;
}

function reach(t: TokenJson): Html {
  switch (t.level) {
    case 'personal':
      return html`Personal`;
    case 'org':
      return html`Organization <a href="${urls.org(t.target ?? '')}">${t.target}</a>`;
    case 'repo': {
      const [org = '', repo = ''] = (t.target ?? '').split('/');
      return html`Repository <a href="${urls.repo(org, repo)}">${t.target}</a>`;
    }
  }
}

function expiry(iso: string | null): Html {
  if (iso === null) return html`<span class="muted">never</span>`;
  const past = Date.parse(iso) <= Date.now();
  return past ? html`<strong class="badge expired">expired</strong> ${timeAgo(iso)}` : timeAgo(iso);
}

export function tokenList(tokens: readonly TokenJson[], formToken: string): Html {
  if (tokens.length === 0) return html`<p class="empty">You have no access tokens.</p>`;
  const rows = tokens.map(
    (t) => html`<tr>
<th scope="row">${t.name}</th>
<td><ul class="scopes">${t.scopes.map((s) => html`<li><code>${s}</code></li>`)}</ul></td>
<td>${reach(t)}</td>
<td>${expiry(t.expires_at)}</td>
<td>${timeAgo(t.last_used_at)}</td>
<td>${timeAgo(t.created_at)}</td>
<td>${actionButton(`${urls.tokens}/${t.id}/delete`, formToken, 'Delete', { danger: true, ariaLabel: `Delete token ${t.name}` })}</td>
</tr>`,
  );
  return html`<div class="table-scroll"><table class="list">
<thead><tr><th scope="col">Name</th><th scope="col">Scopes</th><th scope="col">Reach</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
}

/** The token just made, shown once. */
export function newTokenBox(name: string, value: string): Html {
  return html`<section class="flash ok token-once" role="status" aria-labelledby="new-token-h" data-shown-once>
<h2 id="new-token-h">Your new token “${name}”</h2>
<div class="copy-row">
<label for="new-token" class="visually-hidden">The value of token ${name}</label>
<input id="new-token" type="text" readonly value="${value}" class="mono" aria-describedby="new-token-warn" autocomplete="off" spellcheck="false">
<button type="button" data-copy="${value}" hidden>Copy</button>
</div>
<p id="new-token-warn" class="warn-text"><strong>Copy it now: it will not be shown again.</strong> Triad keeps only a hash of it. Send it as <code>Authorization: Bearer &lt;token&gt;</code>, or as the password of a clone URL.</p>
</section>`;
}
