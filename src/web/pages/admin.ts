/**
 * The site administration's start page (`/-/admin`, site administrators; others get 403): what
 * the pages offer, and where the rest of the administration lives (the API and the CLI).
 */
import { html } from '../html.ts';
import { web } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { adminFrame } from '../views/admin.ts';
import { urls } from '../urls.ts';

export function adminPages(w: WebRouter): void {
  w.userGet(urls.admin, (ctx) => {
    ctx.access.admin();
    return Promise.resolve(
      web.page(
        'Administration',
        adminFrame(
          'overview',
          html`<h1>Administration</h1>
<ul class="plain admin-links">
<li><a href="${urls.adminLabels}">Labels</a>: the site's labels, which the issues of every repository can use.</li>
</ul>
<p class="hint">Users, agents and passwords are managed with the administration API (<code>/api/v1/admin/…</code>) and the command line (<code>npm run triad -- admin …</code>).</p>`,
        ),
      ),
    );
  });
}
