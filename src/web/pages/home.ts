/** The start page and the list of every repository a visitor may see. */
import type { OrgsService } from '../../orgs/service.ts';
import type { ReposService } from '../../repos/service.ts';
import { html } from '../html.ts';
import { web, type PageCtx } from '../context.ts';
import type { WebRouter } from '../web.ts';
import { pageParam, pager, repoList } from '../views/common.ts';
import { urls } from '../urls.ts';

const PER_PAGE = 30;

export function homePages(w: WebRouter, d: { repos: ReposService; orgs: OrgsService }): void {
  const explore = async (ctx: PageCtx, heading: string) => {
    const page = pageParam(ctx.query.page);
    const list = await d.repos.recent(ctx.access.listReach(), false, { page, per_page: PER_PAGE });
    return html`<section aria-labelledby="list-h">
<h1 id="list-h">${heading}</h1>
${repoList(list.items, 'There are no repositories yet.')}
${pager(ctx.path, page, PER_PAGE, list.total)}
</section>`;
  };
  w.get('/', async (ctx) => {
    if (ctx.user === undefined) {
      const hero = html`<section class="hero"><p>Mercurial, Git and Fossil repositories, with their issues, pull requests, releases and pipelines.</p></section>`;
      return web.page('Repositories', html`${hero}${await explore(ctx, 'Public repositories')}`);
    }
    const page = pageParam(ctx.query.page);
    const [orgs, recent] = await Promise.all([
      d.orgs.forUser(ctx.user.id, null, { page: 1, per_page: 100 }),
      d.repos.recent(ctx.access.listReach(), true, { page, per_page: PER_PAGE }),
    ]);
    const orgItems = orgs.items.map(
      (o) => html`<li><a href="${urls.org(o.name)}">${o.name}</a> <span class="muted">${o.role}</span></li>`,
    );
    return web.page(
      'Home',
      html`<div class="columns">
<aside class="side" aria-labelledby="orgs-h">
<h2 id="orgs-h">Your organizations</h2>
${orgItems.length === 0 ? html`<p class="empty">You are in no organization yet.</p>` : html`<ul class="plain">${orgItems}</ul>`}
<p><a class="button subtle" href="/-/new/org">New organization</a></p>
</aside>
<section class="grow" aria-labelledby="recent-h">
<div class="heading-row"><h1 id="recent-h">Recently pushed</h1><a class="button primary" href="/-/new/repo">New repository</a></div>
${repoList(recent.items, html`No repositories in your organizations yet. <a href="/-/explore">Explore</a> the others.`)}
${pager(ctx.path, page, PER_PAGE, recent.total)}
</section>
</div>`,
    );
  });
  w.get('/-/explore', async (ctx) => web.page('Explore', await explore(ctx, 'Repositories')));
}
