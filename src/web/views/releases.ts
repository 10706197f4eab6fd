/**
 * The views of releases: the list, a release's heading and facts, and the form of a new release
 * or of one to change (tag, target, name, notes, draft, pre-release).
 */
import { markdownEditor, type DiscussionRepo } from './markdown-editor.ts';
import type { ReleaseJson } from '../../releases/schemas.ts';
import { field, type FormState } from '../context.ts';
import { html, type Html } from '../html.ts';
import { renderMarkdown } from '../markdown.ts';
import { urls } from '../urls.ts';
import { timeAgo } from './common.ts';
import { revLabel, type RefLists } from './code/refs.ts';
import { checkbox, csrf, input, select } from './forms.ts';

/** What a release is called: its name, else its tag. */
export function releaseTitle(r: ReleaseJson): string {
  return r.name === '' ? r.tag_name : r.name;
}

/** Draft, Pre-release and Latest (the release `GET …/releases/latest` answers). */
export function releaseBadges(r: ReleaseJson, latestId: number | undefined): Html {
  return html`${r.draft ? html` <span class="badge draft">Draft</span>` : ''}${
    r.prerelease ? html` <span class="badge prerelease">Pre-release</span>` : ''
  }${r.id === latestId ? html` <span class="badge ok latest">Latest</span>` : ''}`;
}

function person(p: ReleaseJson['author']): Html {
  return p === null
    ? html`<span class="muted">a deleted user</span>`
    : html`<a href="${urls.user(p.username)}">${p.username}</a>`;
}

/** "Published 3 days ago by ann", or for a draft "Draft, created … by …". */
function when(r: ReleaseJson): Html {
  return r.published_at === null
    ? html`Draft, created ${timeAgo(r.created_at)} by ${person(r.author)}`
    : html`Published ${timeAgo(r.published_at)} by ${person(r.author)}`;
}

function count(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? '' : 's'}`;
}

export function releaseList(
  org: string,
  repo: string,
  items: readonly ReleaseJson[],
  latestId: number | undefined,
): Html {
  if (items.length === 0) return html`<p class="empty">There are no releases yet.</p>`;
  const item = (r: ReleaseJson) => html`<li>
<div class="release-line"><a class="release-name" href="${urls.release(org, repo, r.id)}">${releaseTitle(r)}</a>${releaseBadges(r, latestId)}</div>
<p class="meta"><span class="badge tag" title="Tag">${r.tag_name}</span> · ${when(r)} · ${count(r.assets.length, 'asset')}</p>
</li>`;
  return html`<ul class="release-list">${items.map(item)}</ul>`;
}

/** Tag, target, author and dates of a release; the tag of a draft may not exist yet, so it is no link. */
export function releaseFacts(org: string, repo: string, r: ReleaseJson): Html {
  const tag = r.draft
    ? html`<code>${r.tag_name}</code> <span class="muted">(a new tag is created when the release is published)</span>`
    : html`<a href="${urls.tree(org, repo, r.tag_name)}"><code>${r.tag_name}</code></a>`;
  const facts: [string, Html][] = [
    ['Tag', tag],
    [
      'Target',
      html`<code class="break" title="${r.target_commitish}">${revLabel(r.target_commitish)}</code>`,
    ],
    ['Author', person(r.author)],
    ['Created', timeAgo(r.created_at)],
    [
      'Published',
      r.published_at === null ? html`<span class="muted">not yet (draft)</span>` : timeAgo(r.published_at),
    ],
  ];
  return html`<dl class="facts">${facts.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

/** The notes, rendered (relative links lead to the repository at the release's tag). */
export function releaseNotes(org: string, repo: string, r: ReleaseJson): Html {
  if (r.body.trim() === '') return html`<p class="empty">No release notes.</p>`;
  return html`<div class="markdown release-notes">${renderMarkdown(r.body, { org, repo, rev: r.tag_name, dir: '' })}</div>`;
}

/** The branches and bookmarks a new tag may be created at, as `select` options. */
function targetOptions(refs: RefLists, keep: string): { value: string; label: string }[] {
  const named = (list: RefLists['branch'] | undefined, kind: string) =>
    (list?.items ?? []).map((r) => ({ value: r.name, label: `${r.name} (${kind})` }));
  return [{ value: '', label: keep }, ...named(refs.branch, 'branch'), ...named(refs.bookmark, 'bookmark')];
}

/**
 * The form of a new release (`release` undefined) or of one to change. `state` holds a refused
 * form's values (its hidden `form` field tells them from a first view).
 */
export function releaseForm(o: {
  action: string;
  formToken: string;
  state: FormState;
  refs: RefLists;
  repo: DiscussionRepo;
  release?: ReleaseJson | undefined;
}): Html {
  const r = o.release;
  const v = o.state.values;
  const refused = field(v, 'form') === 'release';
  const text = (name: string, current: string) => (refused ? field(v, name) : current);
  const flag = (name: string, current: boolean) => (refused ? field(v, name) === 'on' : current);
  const keep = r === undefined ? 'None: the tag exists already' : 'Unchanged';
  const target = refused ? field(v, 'target_commitish') : r === undefined ? o.repo.default_branch : '';
  const tags = o.refs.tag.items.map((t) => html`<option value="${t.name}"></option>`);
  return html`<form method="post" action="${o.action}" class="card release-form">
${csrf(o.formToken)}
<input type="hidden" name="form" value="release">
${input({ name: 'tag_name', label: 'Tag', required: true, maxlength: 255, list: 'tag-names', value: text('tag_name', r?.tag_name ?? ''), hint: 'An existing tag, or a new one: a new tag is created at the target below when the release is published.' })}
<datalist id="tag-names">${tags}</datalist>
${select({ name: 'target_commitish', label: 'Target of a new tag', options: targetOptions(o.refs, keep), value: target, hint: 'The branch whose head a new tag marks. An existing tag stays where it is.' })}
${input({ name: 'name', label: 'Title', maxlength: 1000, value: text('name', r?.name ?? ''), hint: 'Shown instead of the tag when given.' })}
${markdownEditor({ repo: o.repo, name: 'body', label: 'Release notes', rows: 12, maxlength: 100_000, value: text('body', r?.body ?? '') })}
${checkbox({ name: 'draft', label: 'Draft: only members of the organization see it, and its tag waits until it is published', checked: flag('draft', r?.draft ?? false) })}
${checkbox({ name: 'prerelease', label: 'Pre-release: never marked as the latest release', checked: flag('prerelease', r?.prerelease ?? false) })}
<button type="submit" class="primary">${r === undefined ? 'Create release' : 'Save release'}</button>
</form>`;
}
