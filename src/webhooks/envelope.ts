import { RequestContext } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { RepoJson } from '../repos/schemas.ts';
import type { ReposService } from '../repos/service.ts';
import { userRefJson } from '../users/schemas.ts';
import type { UsersService } from '../users/service.ts';
import type { UserRefJson } from '../users/schemas.ts';

/**
 * The envelope's `repository`: the spec's `id`, `name`, `org`, `url`, plus what receivers written
 * for other forges look for (`full_name`, `clone_url`, `default_branch`) and Triad's `vcs` and
 * `is_private` (the same names as the repository API).
 */
export type RepositoryInfo = Pick<
  RepoJson,
  'id' | 'name' | 'org' | 'clone_url' | 'vcs' | 'default_branch' | 'is_private'
> & { full_name: string; url: string };
/** The envelope's `sender`: the spec's `id` and `display_name`, as the API's user reference. */
export type SenderInfo = UserRefJson;

/** Facts the envelope needs, looked up through the services that own them. */
export type RepoFacts = RepositoryInfo & { orgId: number };
export type WebhookLookups = {
  repositories(ids: readonly number[]): Promise<Map<number, RepoFacts>>;
  senders(ids: readonly number[]): Promise<Map<number, SenderInfo>>;
};

/** The spec's envelope as the exact bytes sent (the same for every attempt of a delivery). */
export function envelope(e: {
  event: string;
  deliveryId: string;
  repository: RepositoryInfo | null;
  sender: SenderInfo | null;
  timestamp: Date;
  payload: unknown;
}): string {
  return JSON.stringify({
    event: e.event,
    delivery_id: e.deliveryId,
    repository: e.repository,
    sender: e.sender,
    timestamp: e.timestamp.toISOString(),
    payload: e.payload,
  });
}

/** `RepoFacts` without the organization id (what the envelope carries). */
export function repositoryInfo(r: RepoFacts): RepositoryInfo {
  return {
    id: r.id,
    name: r.name,
    org: r.org,
    full_name: r.full_name,
    url: r.url,
    clone_url: r.clone_url,
    vcs: r.vcs,
    default_branch: r.default_branch,
    is_private: r.is_private,
  };
}

/** Repositories and senders through their services, in a request context of their own. */
export function webhookLookups(deps: {
  em: () => EntityManager;
  users: Pick<UsersService, 'get'>;
  repos: Pick<ReposService, 'findHandle' | 'cloneUrl'>;
}): WebhookLookups {
  const run = <T>(fn: () => Promise<T>) => RequestContext.create(deps.em().fork(), fn);
  // Gone since (404): left out. Any other failure fails the pass, so no event is dropped for it.
  const found = <T>(p: Promise<T>) =>
    p.then(
      (v): T | undefined => v,
      (e: unknown) => {
        if (e instanceof ApiError && e.status === 404) return undefined;
        throw e;
      },
    );
  return {
    repositories: (ids) =>
      run(async () => {
        const out = new Map<number, RepoFacts>();
        for (const id of ids) {
          const repo = await deps.repos.findHandle(id);
          if (repo === undefined) continue;
          const cloneUrl = deps.repos.cloneUrl(repo.org, repo.name);
          out.set(id, {
            id,
            name: repo.name,
            org: repo.org,
            full_name: `${repo.org}/${repo.name}`,
            url: cloneUrl,
            clone_url: cloneUrl,
            vcs: repo.vcs,
            default_branch: repo.defaultBranch,
            is_private: repo.isPrivate,
            orgId: repo.orgId,
          });
        }
        return out;
      }),
    senders: (ids) =>
      run(async () => {
        const out = new Map<number, SenderInfo>();
        for (const id of ids) {
          const u = await found(deps.users.get(id));
          if (u !== undefined) out.set(id, userRefJson(u));
        }
        return out;
      }),
  };
}
