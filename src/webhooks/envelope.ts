import { RequestContext } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { OrgsService } from '../orgs/service.ts';
import type { ReposService } from '../repos/service.ts';
import { userRefJson } from '../users/schemas.ts';
import type { UsersService } from '../users/service.ts';
import type { UserRefJson } from '../users/schemas.ts';

/**
 * The envelope's `repository`: the spec's `id`, `name`, `org`, `url`, plus what receivers written
 * for other forges look for (`full_name`, `clone_url`, `default_branch`) and Triad's `vcs` and
 * `is_private` (the same names as the repository API).
 */
export type RepositoryInfo = {
  id: number;
  name: string;
  org: string;
  full_name: string;
  url: string;
  clone_url: string;
  vcs: string;
  default_branch: string;
  is_private: boolean;
};
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
  orgs: Pick<OrgsService, 'byId'>;
  repos: Pick<ReposService, 'get' | 'json'>;
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
          const repo = await found(deps.repos.get(id));
          const org = repo === undefined ? undefined : await found(deps.orgs.byId(repo.orgId));
          if (repo === undefined || org === undefined) continue;
          const json = deps.repos.json(repo, org.name);
          out.set(id, {
            id,
            name: repo.name,
            org: org.name,
            full_name: `${org.name}/${repo.name}`,
            url: json.clone_url,
            clone_url: json.clone_url,
            vcs: json.vcs,
            default_branch: json.default_branch,
            is_private: json.is_private,
            orgId: org.id,
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
