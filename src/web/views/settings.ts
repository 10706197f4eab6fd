/** The frame of the user's settings pages: a side navigation and the page's section. */
import { html, type Html, type Renderable } from '../html.ts';

const ITEMS = [
  { key: 'tokens', href: '/-/settings/tokens', label: 'Access tokens' },
  { key: 'sessions', href: '/-/settings/sessions', label: 'Sessions' },
  { key: 'password', href: '/-/settings/password', label: 'Password' },
] as const;

export type SettingsKey = (typeof ITEMS)[number]['key'];

export function settingsFrame(current: SettingsKey, body: Renderable): Html {
  const items = ITEMS.map(
    (i) =>
      html`<li><a href="${i.href}"${i.key === current ? html` aria-current="page"` : ''}>${i.label}</a></li>`,
  );
  return html`<div class="settings">
<nav class="settings-nav" aria-label="Settings"><ul>${items}</ul></nav>
<section class="settings-body">${body}</section>
</div>`;
}
