/**
 * The views of a new issue: the template chooser (with the templates that could not be used,
 * for the organization's members), and the form, prefilled from a template or blank.
 */
import { SEVERITIES, type LabelJson } from '../../issues/schemas.ts';
import type { IssueTemplate, TemplateSet } from '../../issues/templates.ts';
import { field, fieldList, type FormState } from '../context.ts';
import { html, type Html } from '../html.ts';
import { urls } from '../urls.ts';
import { checkbox, csrf, formError, input, select } from './forms.ts';
import { markdownEditor, type DiscussionRepo } from './markdown-editor.ts';

/** The templates that were skipped and why (shown to those who can fix them). */
export function templateProblems(set: TemplateSet): Html {
  if (set.problems.length === 0) return html``;
  return html`<section class="flash warn template-problems" aria-labelledby="problems-h">
<h2 id="problems-h">Templates that could not be used</h2>
<p>Members of the organization see this list; fix the files on the default branch.</p>
<ul>${set.problems.map((p) => html`<li><code>${set.dir}/${p.file}</code>: ${p.reason}</li>`)}</ul>
</section>`;
}

export function templateChooser(repo: DiscussionRepo, set: TemplateSet, members: boolean): Html {
  const item = (t: IssueTemplate) => html`<li class="template-choice">
<h2>${t.name}</h2>
${t.about === '' ? '' : html`<p>${t.about}</p>`}
<a class="button primary" href="${urls.newIssue(repo.org, repo.name, t.file)}">Get started<span class="visually-hidden"> with ${t.name}</span></a>
</li>`;
  const blank = set.blankIssues
    ? html`<li class="template-choice">
<h2>Blank issue</h2>
<p>Start from an empty form.</p>
<a class="button" href="${urls.newIssue(repo.org, repo.name, '')}">Open a blank issue</a>
</li>`
    : '';
  return html`<h1>New issue</h1>
<p>Choose a template to start from.</p>
<ul class="template-list">${set.templates.map(item)}${blank}</ul>
${members ? templateProblems(set) : ''}`;
}

/** What the form starts with: a template's values, or those of a refused form. */
export type IssueDraft = {
  template: string;
  title: string;
  body: string;
  severity: string;
  labels: string[];
  assignees: string[];
};

export function draftOf(t: IssueTemplate | undefined, state: FormState): IssueDraft {
  if (field(state.values, 'form') === 'issue') {
    const v = state.values;
    const typed = field(v, 'assignees_text');
    return {
      template: field(v, 'template'),
      title: field(v, 'title'),
      body: field(v, 'body'),
      severity: field(v, 'severity'),
      labels: fieldList(v, 'labels'),
      assignees: typed === '' ? fieldList(v, 'assignees') : typed.split(','),
    };
  }
  return {
    template: t?.file ?? '',
    title: t?.title ?? '',
    body: t?.body ?? '',
    severity: 'none',
    labels: t?.labels ?? [],
    assignees: t?.assignees ?? [],
  };
}

export type IssueFormChoices = {
  formToken: string;
  catalog: readonly LabelJson[];
  /** Members to assign (checkboxes), or undefined: usernames are typed. */
  members: readonly { username: string }[] | undefined;
  /** The templates to choose from when a blank issue was refused. */
  templates: readonly IssueTemplate[] | undefined;
};

const same = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();

function missingNote(what: string, names: readonly string[]): Html {
  if (names.length === 0) return html``;
  return html`<p class="hint">The template names ${what} this repository does not have, left out: ${names.join(', ')}.</p>`;
}

export function issueForm(repo: DiscussionRepo, d: IssueDraft, c: IssueFormChoices, state: FormState): Html {
  const chooser =
    c.templates === undefined
      ? html`<input type="hidden" name="template" value="${d.template}">`
      : select({
          name: 'template',
          label: 'Template',
          value: '',
          options: [
            { value: '', label: 'Choose a template' },
            ...c.templates.map((t) => ({ value: t.file, label: t.name })),
          ],
          hint: 'This repository opens issues from its templates only.',
        });
  const labelBoxes = c.catalog.map((l) =>
    checkbox({
      name: 'labels',
      value: l.name,
      id: `f-label-${l.id}`,
      label: l.name,
      checked: d.labels.some((n) => same(n, l.name)),
    }),
  );
  const unknownLabels = d.labels.filter((n) => !c.catalog.some((l) => same(n, l.name)));
  const labels =
    c.catalog.length === 0
      ? ''
      : html`<fieldset><legend>Labels</legend><div class="check-grid">${labelBoxes}</div>${missingNote('labels', unknownLabels)}</fieldset>`;
  let assignees: Html;
  if (c.members === undefined) {
    assignees = input({
      name: 'assignees_text',
      label: 'Assignees',
      value: d.assignees.map((a) => a.trim()).join(', '),
      maxlength: 2000,
      hint: 'Usernames of members of the organization, separated by commas.',
    });
  } else {
    const members = c.members;
    const boxes = members.map((m) =>
      checkbox({
        name: 'assignees',
        value: m.username,
        id: `f-assignee-${m.username}`,
        label: m.username,
        checked: d.assignees.some((a) => same(a, m.username)),
      }),
    );
    const unknown = d.assignees.filter((a) => !members.some((m) => same(a, m.username)));
    assignees = html`<fieldset><legend>Assignees</legend><div class="check-grid">${boxes}</div>${missingNote('assignees', unknown)}</fieldset>`;
  }
  return html`${formError(state)}
<form method="post" action="${urls.newIssue(repo.org, repo.name)}" class="issue-form">
${csrf(c.formToken)}
<input type="hidden" name="form" value="issue">
${chooser}
${input({ name: 'title', label: 'Title', value: d.title, required: true, maxlength: 1000, autofocus: true })}
${markdownEditor({ repo, name: 'body', label: 'Description', value: d.body, rows: 12 })}
${labels}
${assignees}
${select({ name: 'severity', label: 'Severity', value: d.severity === '' ? 'none' : d.severity, options: SEVERITIES.map((s) => ({ value: s, label: s })) })}
<button type="submit" class="primary">Create issue</button>
</form>`;
}
