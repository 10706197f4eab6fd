import { ApiError } from '../http/errors.ts';
import type { OrgsService } from '../orgs/service.ts';
import type { TargetDirectory } from '../users/service.ts';
import type { ReposService } from './service.ts';

/**
 * Token targets by name and back (`org` for an organization token, `org/repo` for a repository
 * token): the users service asks here when a token is created or listed.
 */
export class TokenTargets implements TargetDirectory {
  private readonly orgs: Pick<OrgsService, 'ref' | 'role' | 'names'>;
  private readonly repos: Pick<ReposService, 'ref' | 'names'>;

  constructor(deps: {
    orgs: Pick<OrgsService, 'ref' | 'role' | 'names'>;
    repos: Pick<ReposService, 'ref' | 'names'>;
  }) {
    this.orgs = deps.orgs;
    this.repos = deps.repos;
  }

  /** A target the user may name: an organization they belong to, or one of its repositories (404 otherwise). */
  resolve: TargetDirectory['resolve'] = async (level, target, userId) => {
    const [orgName, repoName, ...rest] = target.split('/');
    const wantRepo = level === 'repo';
    if (
      orgName === undefined ||
      rest.length > 0 ||
      (wantRepo ? repoName === undefined : repoName !== undefined)
    ) {
      throw ApiError.validation(
        `body.target: must be ${wantRepo ? '"org/repo"' : '"org"'} for a ${level} token`,
      );
    }
    const org = await this.orgs.ref(orgName);
    const role = org === undefined ? undefined : await this.orgs.role(org.id, userId);
    if (org === undefined || role === undefined) throw ApiError.notFound('target organization');
    if (!wantRepo) return { orgId: org.id, repoId: null };
    const repo = await this.repos.ref(org, repoName ?? '');
    if (repo === undefined) throw ApiError.notFound('target repository');
    return { orgId: org.id, repoId: repo.id };
  };

  /** Each target as `org` or `org/repo` (a target deleted since names nothing: the token went with it). */
  names: TargetDirectory['names'] = async (targets) => {
    const orgNames = await this.orgs.names(targets.flatMap((t) => (t.orgId === null ? [] : [t.orgId])));
    const repoNames = await this.repos.names(targets.flatMap((t) => (t.repoId === null ? [] : [t.repoId])));
    return targets.map((t) => {
      if (t.orgId === null) return null;
      const org = orgNames.get(t.orgId) ?? '';
      return t.repoId === null ? org : `${org}/${repoNames.get(t.repoId) ?? ''}`;
    });
  };
}
