/**
 * The ref switcher: a `<details>` (usable with the keyboard without script) listing branches,
 * bookmarks (Mercurial) and tags, each a link to the same page at that ref, and a link to the
 * page of all refs. The `refs` island adds a filter field inside it.
 */
import type { Page } from '../../../http/pagination.ts';
import type { RefEntry, RefType } from '../../../vcs/reader.ts';
import { html, type Html } from '../../html.ts';
import { urls } from '../../urls.ts';

/** The first page of each kind of ref a repository has (bookmarks only for Mercurial). */
export type RefLists = { branch: Page<RefEntry>; bookmark: Page<RefEntry> | undefined; tag: Page<RefEntry> };

const KINDS: { type: RefType; label: string; one: string }[] = [
  { type: 'branch', label: 'Branches', one: 'Branch' },
  { type: 'bookmark', label: 'Bookmarks', one: 'Bookmark' },
  { type: 'tag', label: 'Tags', one: 'Tag' },
];

/** What `rev` is among the refs: "Branch", "Tag"... or "Revision" (a commit id or other name). */
export function revKind(refs: RefLists, rev: string): string {
  for (const k of KINDS) {
    if (refs[k.type]?.items.some((r) => r.name === rev) === true) return k.one;
  }
  return 'Revision';
}

/** A commit id is shown short; a name whole. */
export function revLabel(rev: string): string {
  return /^[0-9a-f]{40,64}$/.test(rev) ? rev.slice(0, 12) : rev;
}

export function refSwitcher(
  org: string,
  repo: string,
  refs: RefLists,
  current: string,
  linkFor: (ref: string) => string,
): Html {
  const groups = KINDS.map((k) => {
    const list = refs[k.type];
    if (list === undefined) return html``;
    const id = `refs-${k.type}`;
    const items =
      list.items.length === 0
        ? html`<li class="muted">None</li>`
        : list.items.map(
            (r) =>
              html`<li><a href="${linkFor(r.name)}"${r.name === current ? html` aria-current="true"` : ''}>${r.name}</a>${r.default ? html` <span class="badge">default</span>` : ''}</li>`,
          );
    const more =
      list.total > list.items.length
        ? html`<li class="muted">${list.total - list.items.length} more on the <a href="${urls.refs(org, repo)}">refs page</a></li>`
        : '';
    return html`<p class="ref-kind" id="${id}">${k.label}</p>
<ul class="ref-list" aria-labelledby="${id}">${items}${more}</ul>`;
  });
  return html`<details class="ref-switch" data-refs>
<summary><span class="muted">${revKind(refs, current)}:</span> <strong>${revLabel(current)}</strong></summary>
<div class="ref-menu">
${groups}
<p class="ref-all"><a href="${urls.refs(org, repo)}">All branches and tags</a></p>
</div>
</details>`;
}
