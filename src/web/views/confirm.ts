/**
 * The confirmation step of a deletion, as a page of its own: a link ("Delete…") opens it, its
 * button POSTs, "Cancel" goes back. It needs no script, and nothing is deleted by a GET.
 */
import { html, type Html, type Renderable } from '../html.ts';
import { csrf } from './forms.ts';

export function confirmDeletion(o: {
  /** The question, as the page's heading. */
  question: Renderable;
  /** What goes with it, what stays. */
  detail: Renderable;
  action: string;
  formToken: string;
  button: string;
  cancel: string;
  /** Fields the form sends again (what was selected), a list for a repeated field. */
  hidden?: Record<string, string | readonly string[]>;
}): Html {
  const hidden = Object.entries(o.hidden ?? {}).flatMap(([k, v]) =>
    (typeof v === 'string' ? [v] : v).map((x) => html`<input type="hidden" name="${k}" value="${x}">`),
  );
  return html`<section class="confirm card" aria-labelledby="confirm-h">
<h1 id="confirm-h" class="break">${o.question}</h1>
<p>${o.detail}</p>
<div class="actions">
<form method="post" action="${o.action}" class="inline">${csrf(o.formToken)}${hidden}<button type="submit" class="danger">${o.button}</button></form>
<a class="button" href="${o.cancel}">Cancel</a>
</div>
</section>`;
}
