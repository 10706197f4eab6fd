/**
 * The frame of a repository's settings pages: the repository head (its settings tab) and a side
 * navigation between the general settings and the webhooks.
 */
import { html, type Html, type Renderable } from '../html.ts';
import type { RepoPage } from '../repo-page.ts';
import { urls } from '../urls.ts';
import { repoHeader } from './repo.ts';

export type RepoSettingsKey = 'general' | 'webhooks' | 'protections';

export function repoSettingsFrame(p: RepoPage, current: RepoSettingsKey, body: Renderable): Html {
  const { org, name } = p.repo;
  const items = [
    { key: 'general', href: urls.settings(org, name), label: 'General' },
    { key: 'webhooks', href: urls.webhooks(org, name), label: 'Webhooks' },
    { key: 'protections', href: `${urls.settings(org, name)}/protections`, label: 'Protected refs' },
  ].map(
    (i) =>
      html`<li><a href="${i.href}"${i.key === current ? html` aria-current="page"` : ''}>${i.label}</a></li>`,
  );
  return html`${repoHeader(p, 'settings')}
<div class="settings">
<nav class="settings-nav" aria-label="Repository settings"><ul>${items}</ul></nav>
<section class="settings-body">${body}</section>
</div>`;
}
