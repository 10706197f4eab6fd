/**
 * Pieces of forms: every control has a visible label, errors are announced (`role="alert"`),
 * and each form of a signed-in page carries the session's form token.
 */
import { html, type Html, type Renderable } from '../html.ts';
import { ApiError } from '../../http/errors.ts';
import { field, type FormState } from '../context.ts';

export function csrf(token: string | undefined): Html {
  return html`<input type="hidden" name="_csrf" value="${token ?? ''}">`;
}

/** The reason a form was refused, above it. */
export function formError(state: FormState): Html {
  return state.error === undefined ? html`` : html`<p class="flash error" role="alert">${state.error}</p>`;
}

export type InputOptions = {
  name: string;
  label: string;
  type?: 'text' | 'password' | 'email' | 'date' | 'url' | 'search' | 'color';
  value?: string;
  required?: boolean;
  autocomplete?: string;
  hint?: Renderable;
  maxlength?: number;
  minlength?: number;
  pattern?: string;
  autofocus?: boolean;
  placeholder?: string;
  id?: string;
  /** The id of a `<datalist>` of suggestions. */
  list?: string;
};

/** Optional attributes: `name="value"` for each defined value, ` name` for each true flag. */
function attrs(values: Record<string, string | number | boolean | undefined>): Html {
  return html`${Object.entries(values).map(([k, v]) =>
    v === undefined || v === false ? '' : v === true ? html` ${k}` : html` ${k}="${v}"`,
  )}`;
}

/** A labelled input; `value` defaults to what `state` kept of the field (never a password). */
export function input(o: InputOptions, state?: FormState): Html {
  const id = o.id ?? `f-${o.name}`;
  const value = o.value ?? (state === undefined || o.type === 'password' ? '' : field(state.values, o.name));
  const hintId = o.hint === undefined ? undefined : `${id}-hint`;
  const extra = attrs({
    required: o.required,
    autofocus: o.autofocus,
    autocomplete: o.autocomplete,
    maxlength: o.maxlength,
    minlength: o.minlength,
    pattern: o.pattern,
    placeholder: o.placeholder,
    list: o.list,
    'aria-describedby': hintId,
  });
  return html`<div class="field">
<label for="${id}">${o.label}</label>
<input id="${id}" name="${o.name}" type="${o.type ?? 'text'}" value="${value}"${extra}>
${hintId === undefined ? '' : html`<p class="hint" id="${hintId}">${o.hint}</p>`}
</div>`;
}

export function textarea(
  o: { name: string; label: string; value?: string; rows?: number; maxlength?: number; hint?: Renderable },
  state?: FormState,
): Html {
  const id = `f-${o.name}`;
  const value = o.value ?? (state === undefined ? '' : field(state.values, o.name));
  const hintId = o.hint === undefined ? undefined : `${id}-hint`;
  const extra = attrs({ rows: o.rows ?? 3, maxlength: o.maxlength, 'aria-describedby': hintId });
  return html`<div class="field">
<label for="${id}">${o.label}</label>
<textarea id="${id}" name="${o.name}"${extra}>${value}</textarea>
${hintId === undefined ? '' : html`<p class="hint" id="${hintId}">${o.hint}</p>`}
</div>`;
}

export function checkbox(o: {
  name: string;
  label: Renderable;
  value?: string;
  checked: boolean;
  id?: string;
}): Html {
  const id = o.id ?? `f-${o.name}-${o.value ?? 'on'}`;
  return html`<div class="check">
<input type="checkbox" id="${id}" name="${o.name}" value="${o.value ?? 'on'}"${attrs({ checked: o.checked })}>
<label for="${id}">${o.label}</label>
</div>`;
}

export function select(o: {
  name: string;
  label: string;
  options: readonly { value: string; label: string }[];
  value: string;
  id?: string;
  hint?: Renderable;
}): Html {
  const id = o.id ?? `f-${o.name}`;
  const hintId = o.hint === undefined ? undefined : `${id}-hint`;
  return html`<div class="field">
<label for="${id}">${o.label}</label>
<select id="${id}" name="${o.name}"${attrs({ 'aria-describedby': hintId })}>
${o.options.map((x) => html`<option value="${x.value}"${attrs({ selected: x.value === o.value })}>${x.label}</option>`)}
</select>
${hintId === undefined ? '' : html`<p class="hint" id="${hintId}">${o.hint}</p>`}
</div>`;
}

/** A form with one button that POSTs to `action` (delete, revoke, redeliver). */
export function actionButton(
  action: string,
  token: string | undefined,
  label: Renderable,
  opts: { danger?: boolean; hidden?: Record<string, string>; ariaLabel?: string } = {},
): Html {
  const hidden = Object.entries(opts.hidden ?? {}).map(
    ([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`,
  );
  return html`<form method="post" action="${action}" class="inline">${csrf(token)}${hidden}<button type="submit" class="${
    opts.danger === true ? 'danger' : 'secondary'
  }"${attrs({ 'aria-label': opts.ariaLabel })}>${label}</button></form>`;
}

/** The new password and its repetition (the password pages and the one-time link's). */
export function newPasswordFields(): Html {
  const common = { type: 'password', required: true, autocomplete: 'new-password', maxlength: 1024 } as const;
  return html`${input({ ...common, name: 'password', label: 'New password', minlength: 8, hint: 'At least 8 characters.' })}
${input({ ...common, name: 'password_confirm', label: 'New password again' })}`;
}

/** The new password of `newPasswordFields` (400 when the two differ). */
export function newPasswordOf(values: FormState['values']): string {
  const password = field(values, 'password');
  if (password !== field(values, 'password_confirm'))
    throw ApiError.validation('The two new passwords are not the same.');
  return password;
}
