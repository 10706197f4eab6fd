/**
 * The web interface's routes, mounted by the app after the API and before the clone URLs: the
 * assets, then each page group. Unknown paths under `/-/` and `/:org/:repo/-/` are HTML 404s.
 */
import type { Router } from 'express';
import type { Logger } from 'pino';
import type { Directory } from '../http/auth.ts';
import type { AuthThrottle } from '../http/throttle.ts';
import type { Services } from '../services.ts';
import { assets } from './assets.ts';
import { errorPage, securityHeaders, WebRouter } from './web.ts';
import { authPages } from './pages/auth.ts';
import { homePages } from './pages/home.ts';
import { accountPages } from './pages/account.ts';
import { orgPages } from './pages/orgs.ts';
import { repoHomePages } from './pages/code/home.ts';
import { blobPages } from './pages/code/blob.ts';
import { downloadPages } from './pages/code/downloads.ts';
import { logPages } from './pages/code/log.ts';
import { changesetPages } from './pages/code/changeset.ts';
import { refsPages } from './pages/code/refs.ts';
import { releasePages } from './pages/releases.ts';
import { releaseAssetPages } from './pages/release-assets.ts';
import { newRepoPages } from './pages/new-repo.ts';
import { tokenPages } from './pages/tokens.ts';
import { profilePages } from './pages/profile.ts';
import { memberPages } from './pages/members.ts';
import { repoSettingsPages } from './pages/repo-settings.ts';
import { webhookPages } from './pages/webhooks.ts';
import { protectionPages } from './pages/protections.ts';
import { adminPages } from './pages/admin.ts';
import { labelPages } from './pages/labels.ts';
import { stepLogPages } from './pages/pipelines/logs.ts';
import { pipelineListPages } from './pages/pipelines/list.ts';
import { pipelinePages } from './pages/pipelines/detail.ts';
import { issueListPages } from './pages/issues.ts';
import { issuePages } from './pages/issue.ts';
import { previewPages } from './pages/preview.ts';
import { pullListPages } from './pages/pulls/list.ts';
import { pullDetailPages } from './pages/pulls/detail.ts';
import { pullChangesPages } from './pages/pulls/changes.ts';

export type WebRoutesDeps = {
  services: Services;
  dir: Directory;
  baseUrl: () => string;
  log: Logger;
  throttle: AuthThrottle | undefined;
  sessionMaxMs: number;
};

export function webRoutes(d: WebRoutesDeps): Router {
  const s = d.services;
  const w = new WebRouter({
    dir: d.dir,
    sessions: s.sessions,
    baseUrl: d.baseUrl,
    log: d.log.child({ component: 'web' }),
    sessionMaxMs: d.sessionMaxMs,
  });
  w.router.get('/-/assets/:file', (req, res) => {
    const a = assets().get(req.params.file);
    securityHeaders(res);
    if (a === undefined) {
      res.status(404).type('text/plain; charset=utf-8').send('no such asset\n');
      return;
    }
    res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
    res.setHeader('ETag', a.etag);
    if (req.headers['if-none-match'] === a.etag) {
      res.status(304).end();
      return;
    }
    res.status(200).type(a.type).send(a.body);
  });
  authPages(w, { users: s.users, sessions: s.sessions, throttle: d.throttle });
  homePages(w, { repos: s.repos, orgs: s.orgs });
  accountPages(w, { users: s.users, sessions: s.sessions, throttle: d.throttle });
  newRepoPages(w, { orgs: s.orgs, repos: s.repos });
  tokenPages(w, { users: s.users, orgs: s.orgs, repos: s.repos });
  profilePages(w, { users: s.users });
  memberPages(w, { orgs: s.orgs, users: s.users });
  repoSettingsPages(w, { repos: s.repos });
  webhookPages(w, { webhooks: s.webhooks, repos: s.repos });
  protectionPages(w, { protections: s.protections, repos: s.repos });
  adminPages(w);
  // (the site's, an organization's and a repository's labels: before `/:org` and the code pages)
  labelPages(w, { labels: s.issues.labels, repos: s.repos });
  // (after every page under /-/: `/:org` would take them)
  orgPages(w, { orgs: s.orgs, repos: s.repos });
  // the code pages (after every page under /-/: `/:org/:repo` would take them)
  const code = { repos: s.repos, contents: s.contents, refs: s.refs, releases: s.releases };
  repoHomePages(w, code);
  blobPages(w, code);
  downloadPages(w, code);
  logPages(w, code);
  changesetPages(w, code);
  refsPages(w, code);
  const ci = { repos: s.repos, pipelines: s.pipelines, log: d.log };
  pipelineListPages(w, ci);
  pipelinePages(w, ci);
  stepLogPages(w, ci);
  releasePages(w, code);
  releaseAssetPages(w, code);
  // the issues (`/-/issues/new` before `/-/issues/:number`) and the markdown editor's preview
  const issues = { issues: s.issues, repos: s.repos, orgs: s.orgs };
  issueListPages(w, issues);
  issuePages(w, issues);
  previewPages(w, { repos: s.repos });
  // pull requests (`/pulls/new` before `/pulls/:number`)
  const pulls = { repos: s.repos, pulls: s.pulls, refs: s.refs, compare: s.compare };
  pullListPages(w, pulls);
  pullDetailPages(w, pulls);
  pullChangesPages(w, pulls);
  // what no page answers below the web's own prefixes is a page too
  for (const path of ['/-/*rest', '/:org/-/*rest', '/:org/:repo/-/*rest']) {
    w.get(path, () => Promise.resolve(errorPage(404, 'not found')));
  }
  return w.router;
}
