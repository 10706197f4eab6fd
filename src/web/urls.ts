/**
 * The addresses of the web's pages, built in one place. A revision is one path segment (its `/`
 * percent-encoded, so `release/1.0` stays one segment); a file path keeps its `/` and has every
 * segment encoded.
 */
export const enc = encodeURIComponent;

/** `a/b c` -> `a/b%20c` (each segment encoded, the slashes kept). */
export function encPath(path: string): string {
  return path
    .split('/')
    .filter((s) => s !== '')
    .map(enc)
    .join('/');
}

export const urls = {
  org: (org: string) => `/${enc(org)}`,
  orgMembers: (org: string) => `/${enc(org)}/-/members`,
  orgWebhooks: (org: string) => `/${enc(org)}/-/settings/webhooks`,
  orgLabels: (org: string) => `/${enc(org)}/-/labels`,
  admin: '/-/admin',
  adminLabels: '/-/admin/labels',
  user: (username: string) => `/-/users/${enc(username)}`,
  repo: (org: string, repo: string) => `/${enc(org)}/${enc(repo)}`,
  /** A page below the repository: `/:org/:repo/-/<rest>` (`rest` already encoded). */
  repoSub: (org: string, repo: string, rest: string) => `/${enc(org)}/${enc(repo)}/-/${rest}`,
  tree: (org: string, repo: string, rev: string, path = '') =>
    urls.repoSub(org, repo, `tree/${enc(rev)}${path === '' ? '' : `/${encPath(path)}`}`),
  blob: (org: string, repo: string, rev: string, path: string) =>
    urls.repoSub(org, repo, `blob/${enc(rev)}/${encPath(path)}`),
  raw: (org: string, repo: string, rev: string, path: string) =>
    urls.repoSub(org, repo, `raw/${enc(rev)}/${encPath(path)}`),
  log: (org: string, repo: string, rev?: string) =>
    urls.repoSub(org, repo, rev === undefined ? 'log' : `log/${enc(rev)}`),
  changeset: (org: string, repo: string, rev: string) => urls.repoSub(org, repo, `changeset/${enc(rev)}`),
  refs: (org: string, repo: string) => urls.repoSub(org, repo, 'refs'),
  archive: (org: string, repo: string, rev: string, format: 'tar.gz' | 'zip') =>
    urls.repoSub(org, repo, `archive/${enc(rev)}.${format}`),
  settings: (org: string, repo: string) => urls.repoSub(org, repo, 'settings'),
  webhooks: (org: string, repo: string) => urls.repoSub(org, repo, 'settings/webhooks'),
  /** One webhook below its list (`base`: `webhooks` or `orgWebhooks`), and one of its deliveries. */
  webhook: (base: string, id: number) => `${base}/${id}`,
  delivery: (base: string, id: number, record: number) => `${base}/${id}/deliveries/${record}`,
  labels: (org: string, repo: string) => urls.repoSub(org, repo, 'labels'),
  /** One label below its list (`base`: `labels`, `orgLabels` or `adminLabels`), and its deletion. */
  label: (base: string, id: number) => `${base}/${id}`,
  labelDelete: (base: string, id: number) => `${base}/${id}/delete`,
  /** Pull requests: the list (by status), one (`tab`: commits, files), a new one (source and target). */
  pulls: (org: string, repo: string, status?: string) =>
    urls.repoSub(
      org,
      repo,
      status === undefined || status === 'open' ? 'pulls' : `pulls?status=${enc(status)}`,
    ),
  pull: (org: string, repo: string, n: number, tab?: 'commits' | 'files' | 'merge-box') =>
    urls.repoSub(org, repo, `pulls/${n}${tab === undefined ? '' : `/${tab}`}`),
  newPull: (org: string, repo: string, refs: { source?: string; target?: string } = {}) => {
    const q = new URLSearchParams();
    if (refs.target !== undefined) q.set('target', refs.target);
    if (refs.source !== undefined) q.set('source', refs.source);
    const qs = q.toString();
    return urls.repoSub(org, repo, `pulls/new${qs === '' ? '' : `?${qs}`}`);
  },
  /** One file of the diff between two commits (`as`: its page, or the fragment the `diff` island loads). */
  compareFile: (org: string, repo: string, base: string, head: string, n: number, as: 'file' | 'fragment') =>
    urls.repoSub(org, repo, `compare/${enc(base)}...${enc(head)}/${as}/${n}`),
  newRepo: (org?: string) => (org === undefined ? '/-/new/repo' : `/-/new/repo?org=${enc(org)}`),
  tokens: '/-/settings/tokens',
  pipelines: (org: string, repo: string) => urls.repoSub(org, repo, 'pipelines'),
  pipeline: (org: string, repo: string, n: number) => urls.repoSub(org, repo, `pipelines/${n}`),
  /** A step's page, or below it `raw` / `live` (the log for sessions). */
  step: (org: string, repo: string, n: number, step: number, rest?: 'raw' | 'live') =>
    urls.repoSub(org, repo, `pipelines/${n}/steps/${step}${rest === undefined ? '' : `/${rest}`}`),
  releases: (org: string, repo: string) => urls.repoSub(org, repo, 'releases'),
  newRelease: (org: string, repo: string) => urls.repoSub(org, repo, 'releases/new'),
  /** A release's page, and below it `edit`, `delete` and `assets` (the upload form's target). */
  release: (org: string, repo: string, id: number, sub?: 'edit' | 'delete' | 'assets') =>
    urls.repoSub(org, repo, `releases/${id}${sub === undefined ? '' : `/${sub}`}`),
  /** The issue list (`query`: its filters, already a query string without `?`). */
  issues: (org: string, repo: string, query = '') =>
    urls.repoSub(org, repo, `issues${query === '' ? '' : `?${query}`}`),
  /** The new issue page: the template chooser, or the form (of a template, or blank). */
  newIssue: (org: string, repo: string, template?: string) =>
    urls.repoSub(
      org,
      repo,
      `issues/new${template === undefined ? '' : template === '' ? '?blank=1' : `?template=${enc(template)}`}`,
    ),
  issue: (org: string, repo: string, number: number) => urls.repoSub(org, repo, `issues/${number}`),
  /** The markdown preview of a repository's text fields (POST, answers a fragment). */
  preview: (org: string, repo: string) => urls.repoSub(org, repo, 'preview'),
  releaseAsset: (org: string, repo: string, releaseId: number, assetId: number) =>
    urls.repoSub(org, repo, `releases/${releaseId}/assets/${assetId}`),
  releaseAssetDelete: (org: string, repo: string, releaseId: number, assetId: number) =>
    `${urls.releaseAsset(org, repo, releaseId, assetId)}/delete`,
};
