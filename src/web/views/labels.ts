/**
 * Labels as the pages show them: the chip (a label's name on its colour), and the views of the
 * label pages (a scope's list, the merged catalog of a repository, the form, the deletion's
 * confirmation).
 *
 * The chip under the CSP: `style-src 'self'` refuses `style` attributes, and a label's colour is
 * any of 16 million, so neither a style attribute nor a fixed set of classes shows it. The chip
 * holds an inline SVG whose `<rect fill="#rrggbb">` paints its background: `fill` is an SVG
 * presentation attribute, not a style, so the CSP allows it, it needs no script, and the colour
 * is exactly the label's. The stylesheet (`labels.css`) lays the SVG under the text. The text is
 * black or white, whichever contrasts more with the colour (WCAG relative luminance): the worse
 * of the two is never below 4.58:1, above the 4.5:1 of WCAG AA for normal text. The browser test
 * checks each chip's ratio itself, since axe cannot compute a contrast over an SVG.
 */
import type { LabelScope } from '../../issues/schemas.ts';
import type { LabelUse, MergedLabel } from '../../issues/labels.ts';
import { html, type Html, type Renderable } from '../html.ts';
import { field, type FormState } from '../context.ts';
import { urls } from '../urls.ts';
import { csrf, input } from './forms.ts';

/** The WCAG relative luminance of `#rrggbb`. */
export function luminance(color: string): number {
  const channel = (i: number) => {
    const c = parseInt(color.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/** The text colour of a chip: black (`dark`) or white (`light`), the one of higher contrast. */
export function inkFor(color: string): 'dark' | 'light' {
  const l = /^#[0-9a-f]{6}$/i.test(color) ? luminance(color) : 1;
  // contrast with black (l + 0.05) / 0.05 against white 1.05 / (l + 0.05)
  return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? 'dark' : 'light';
}

/** A label: its name on its colour (see the file's comment). */
export function labelChip(l: { name: string; color: string }): Html {
  return html`<span class="label-chip ink-${inkFor(l.color)}"><svg class="label-fill" aria-hidden="true" focusable="false" viewBox="0 0 1 1" preserveAspectRatio="none"><rect width="1" height="1" fill="${l.color}"/></svg>${l.name}</span>`;
}

/** Several labels in a row (an issue's). */
export function labelChips(labels: readonly { name: string; color: string }[]): Html {
  return html`<span class="label-chips">${labels.map(labelChip)}</span>`;
}

export const SCOPE_LABEL: Record<LabelScope, string> = {
  admin: 'Site',
  org: 'Organization',
  repo: 'Repository',
};

export function scopeBadge(scope: LabelScope): Html {
  return html`<span class="badge scope-${scope}">${SCOPE_LABEL[scope]}</span>`;
}

export function issueCount(n: number): string {
  return n === 0 ? 'none' : n === 1 ? '1 issue' : `${n} issues`;
}

/** Whose labels a page manages, and where: the list's URL, the name shown, the page's frame. */
export type LabelPlace = {
  /** The list's URL; a label's page is `${base}/${id}`. */
  base: string;
  /** "the site", `org` or `org/repo`. */
  name: string;
  what: 'site' | 'organization' | 'repository';
  frame: (body: Renderable) => Html;
};

/** The links of a label's row for those who manage its scope. */
function manageLinks(base: string, l: { id: number; name: string }): Html {
  return html`<a href="${urls.label(base, l.id)}">Edit<span class="visually-hidden"> ${l.name}</span></a>
<a href="${urls.labelDelete(base, l.id)}" class="danger-link">Delete<span class="visually-hidden"> ${l.name}</span></a>`;
}

/** The labels of one scope (site or organization): chip, description, use, and edit and delete. */
export function labelTable(place: LabelPlace, items: readonly LabelUse[]): Html {
  if (items.length === 0) return html`<p class="empty">There are no ${place.what} labels yet.</p>`;
  const rows = items.map(
    (l) => html`<tr>
<th scope="row">${labelChip(l)}</th>
<td>${l.description === '' ? html`<span class="muted">No description</span>` : l.description}</td>
<td>${issueCount(l.issues)}</td>
<td class="row-actions">${manageLinks(place.base, l)}</td>
</tr>`,
  );
  return html`<div class="table-scroll"><table class="list labels">
<thead><tr><th scope="col">Label</th><th scope="col">Description</th><th scope="col">Issues</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
}

/** Where a repository's viewer manages the broader scopes (undefined: not this viewer). */
export type BroaderLinks = { org?: string | undefined; site?: string | undefined };

/**
 * A repository's merged catalog: each name's label in effect with its scope, what it shadows and
 * how many of the repository's issues carry it; `manage` (the repository's owners) adds edit and
 * delete to the repository's own labels, and links to the broader scopes' pages.
 */
export function mergedTable(
  base: string,
  items: readonly MergedLabel[],
  manage: boolean,
  broader: BroaderLinks,
): Html {
  if (items.length === 0) return html`<p class="empty">This repository has no labels to use yet.</p>`;
  const where: Record<LabelScope, string | undefined> = {
    admin: broader.site,
    org: broader.org,
    repo: undefined,
  };
  const rows = items.map((l) => {
    const shadows =
      l.shadows.length === 0
        ? ''
        : html`<br><span class="muted">shadows the ${l.shadows.map((s) => SCOPE_LABEL[s].toLowerCase()).join(' and ')} ${l.shadows.length === 1 ? 'label' : 'labels'} of this name</span>`;
    const broaderPage = where[l.scope];
    const actions = !manage
      ? ''
      : html`<td class="row-actions">${
          l.scope === 'repo'
            ? manageLinks(base, l)
            : broaderPage === undefined
              ? ''
              : html`<a href="${broaderPage}">Manage<span class="visually-hidden"> ${l.name}</span> on the ${SCOPE_LABEL[l.scope].toLowerCase()} page</a>`
        }</td>`;
    return html`<tr>
<th scope="row">${labelChip(l)}</th>
<td>${l.description === '' ? html`<span class="muted">No description</span>` : l.description}</td>
<td>${scopeBadge(l.scope)}${shadows}</td>
<td>${issueCount(l.issues)}</td>
${actions}
</tr>`;
  });
  const actionsHead = manage ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : '';
  return html`<div class="table-scroll"><table class="list labels">
<thead><tr><th scope="col">Label</th><th scope="col">Description</th><th scope="col">Scope</th><th scope="col">Issues</th>${actionsHead}</tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
}

/** Colours a new label starts with, in turn (any other can be chosen). */
const PALETTE = ['#d73a4a', '#0e8a16', '#1d76db', '#fbca04', '#5319e7', '#b60205', '#006b75', '#e99695'];

export function defaultColor(existing: number): string {
  return PALETTE[existing % PALETTE.length]!;
}

/**
 * The form of a new label (`label` undefined; `color` its first colour) or of one to change;
 * `state` holds a refused form's values.
 */
export function labelForm(
  action: string,
  formToken: string,
  state: FormState,
  opts: { label?: { name: string; color: string; description: string }; color?: string },
): Html {
  const refused = Object.keys(state.values).length > 0;
  const l = opts.label;
  const value = (name: 'name' | 'color' | 'description', fallback: string) =>
    refused ? field(state.values, name) : fallback;
  return html`<form method="post" action="${action}" class="card label-form">
${csrf(formToken)}
${input({ name: 'name', label: 'Name', required: true, maxlength: 100, autocomplete: 'off', value: value('name', l?.name ?? '') })}
${input({ name: 'color', label: 'Colour', type: 'color', required: true, value: value('color', l?.color ?? opts.color ?? PALETTE[0]!), hint: 'The name is shown on it in black or white, whichever reads better.' })}
${input({ name: 'description', label: 'Description', maxlength: 1000, autocomplete: 'off', value: value('description', l?.description ?? '') })}
<button type="submit" class="primary">${l === undefined ? 'Create label' : 'Save label'}</button>
</form>`;
}

/** The deletion's confirmation: what goes, and from how many issues. */
export function deleteConfirm(place: LabelPlace, l: LabelUse, formToken: string): Html {
  const carriers =
    l.issues === 0
      ? html`<p>No issue carries it.</p>`
      : l.issues === 1
        ? html`<p><strong>1 issue</strong> carries it and will lose it. Its other labels, and the issue itself, stay as they are.</p>`
        : html`<p><strong>${l.issues} issues</strong> carry it and will lose it. Their other labels, and the issues themselves, stay as they are.</p>`;
  return html`<section class="danger-zone" aria-labelledby="delete-h">
<h1 id="delete-h">Delete the label ${labelChip(l)}?</h1>
${carriers}
<p>Deleting a label cannot be undone.</p>
<form method="post" action="${urls.labelDelete(place.base, l.id)}" class="actions">
${csrf(formToken)}
<button type="submit" class="danger">Delete label</button>
<a href="${place.base}">Cancel</a>
</form>
</section>`;
}
