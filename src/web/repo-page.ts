/**
 * A repository page's first step: the repository named by the path, authorised for the viewer
 * exactly as the API authorises it (a private repository the viewer may not see is a 404), with
 * its record and the viewer's role in its organization.
 */
import type { Role } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import type { RepoNeeds } from '../http/auth.ts';
import type { RepoJson } from '../repos/schemas.ts';
import type { ReposService } from '../repos/service.ts';
import type { PageCtx } from './context.ts';

export type RepoPage = { target: RepoTarget; repo: RepoJson; role: Role | undefined };

export async function loadRepo(
  ctx: PageCtx,
  repos: Pick<ReposService, 'get' | 'json'>,
  needs: RepoNeeds = { scope: 'repo:read' },
): Promise<RepoPage> {
  const target = await ctx.access.repo(ctx.params.org ?? '', ctx.params.repo ?? '', needs);
  const row = await repos.get(target.repo.id);
  return { target, repo: repos.json(row, target.org.name), role: await ctx.access.roleIn(target.org.id) };
}
