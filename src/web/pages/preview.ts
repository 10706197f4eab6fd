/**
 * The markdown editor's preview (`POST /:org/:repo/-/preview`, field `text`): a signed-in user's
 * form like any other (same-origin and the session's form token), for a repository the user may
 * see (404 otherwise). It answers the text rendered as a fragment, 413 with a sentence when the
 * text is longer than the bodies it previews may be.
 */
import type { ReposService } from '../../repos/service.ts';
import { web } from '../context.ts';
import { html } from '../html.ts';
import { loadRepo } from '../repo-page.ts';
import type { WebRouter } from '../web.ts';
import { editorText, PREVIEW_MAX_CHARS, renderDiscussion } from '../views/markdown-editor.ts';

export function previewPages(w: WebRouter, d: { repos: Pick<ReposService, 'get' | 'json'> }): void {
  w.userPost('/:org/:repo/-/preview', async (ctx, values) => {
    const p = await loadRepo(ctx, d.repos);
    const text = editorText(values, 'text');
    if (text.length > PREVIEW_MAX_CHARS) {
      return web.fragment(
        html`<p class="flash error" role="alert">This text is too long to preview: ${text.length.toLocaleString('en')} characters, at most ${PREVIEW_MAX_CHARS.toLocaleString('en')}.</p>`,
        413,
      );
    }
    if (text.trim() === '') return web.fragment(html`<p class="empty">Nothing to preview.</p>`);
    return web.fragment(renderDiscussion(p.repo, text));
  });
}
