/**
 * What the pull request pages share: their services, the repository and pull request of a URL
 * (authorised as the API authorises their reads: `pulls:read`), and what a viewer may do.
 */
import type { PullsService } from '../../../pulls/service.ts';
import type { PullJson } from '../../../pulls/schemas.ts';
import type { CompareService } from '../../../repos/compare.ts';
import type { RefsService } from '../../../repos/refs.ts';
import type { ReposService } from '../../../repos/service.ts';
import { idParam, type PageCtx } from '../../context.ts';
import type { MarkdownPlace } from '../../markdown.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';

export type PullDeps = {
  repos: ReposService;
  pulls: PullsService;
  refs: RefsService;
  compare: CompareService;
};

/** What reading pull requests needs (the API's `pulls:read`: public repositories need nothing). */
export const PULLS_READ = { scope: 'pulls:read' } as const;
/** What opening and merging need (the API's: `pulls:write` and membership). */
export const PULLS_MEMBER = { scope: 'pulls:write', role: 'member' } as const;

export type PullPage = { p: RepoPage; pull: PullJson };

/** The repository and the pull request `:number` of the URL, with its comments (404 when none). */
export async function loadPull(ctx: PageCtx, d: PullDeps): Promise<PullPage> {
  const p = await loadRepo(ctx, d.repos, PULLS_READ);
  const pull = await d.pulls.reads.detail(p.target, idParam(ctx.params.number));
  return { p, pull };
}

/** May the viewer change title, body and state (the author or an org owner, until it is merged)? */
export function mayEdit(ctx: PageCtx, { p, pull }: PullPage): boolean {
  if (ctx.user === undefined || pull.status === 'merged') return false;
  return p.role === 'owner' || pull.author?.id === ctx.user.id;
}

/** Where relative links of a pull request's texts go: the repository at its source head. */
export function textPlace({ p, pull }: PullPage): MarkdownPlace {
  return { org: p.repo.org, repo: p.repo.name, rev: pull.head_commit, dir: '' };
}
