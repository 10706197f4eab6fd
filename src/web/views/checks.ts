import type { ChecksJson } from '../../statuses/schemas.ts';
import { html, type Html } from '../html.ts';

/**
 * A pull request's checks (the commit statuses of its head, DESIGN section 5): the summed-up
 * state and each context with its state and, when reported, a link to its page (http and https
 * only; the API accepts nothing else either).
 */
const SUMMARY: Record<ChecksJson['state'], string> = {
  none: 'No checks',
  pending: 'Checks pending',
  success: 'All checks passed',
  failure: 'Some checks failed',
};

const link = (url: string | null, text: string): Html | string =>
  url !== null && /^https?:\/\//i.test(url)
    ? html`<a href="${url}" rel="nofollow noopener">${text}</a>`
    : text;

export function checksBox(checks: ChecksJson | undefined): Html | string {
  if (checks === undefined || checks.state === 'none') return '';
  return html`<section class="card pr-checks" aria-labelledby="pr-checks-h">
<h2 id="pr-checks-h"><span class="badge check-${checks.state}">${SUMMARY[checks.state]}</span></h2>
<ul class="check-list">
${checks.contexts.map(
  (c) =>
    html`<li data-context="${c.context}"><span class="badge check-${c.state}">${c.state}</span> ${link(c.target_url, c.context)}</li>`,
)}
</ul>
</section>`;
}
