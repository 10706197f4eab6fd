import { reply, respond, type Api } from '../http/api.ts';
import type { Scope } from '../domain/access.ts';
import type { ReposService } from '../repos/service.ts';
import { repoSchema } from '../repos/schemas.ts';
import type { SearchService } from './service.ts';
import {
  earlierSearchHitShape,
  searchHitSchema,
  searchIssuesQuery,
  searchReposQuery,
  type SearchKind,
} from './schemas.ts';

/** The scope each kind of record needs on a private repository. */
const READ: Record<SearchKind, Scope> = { issue: 'issues:read', pull: 'pulls:read' };

export function searchRoutes(api: Api, search: SearchService, repos: ReposService): void {
  api.route({
    method: 'get',
    path: '/api/v1/search/repos',
    tag: 'search',
    auth: 'public',
    operationId: 'searchRepos',
    summary: 'Repositories the caller can see whose name contains `q` or whose description matches its words',
    query: searchReposQuery,
    returns: respond.list(
      repoSchema,
      'repositories: name equal to `q`, then starting with it, then containing it, then description matches',
    ),
    handler: async ({ access, query }) => reply.list(await repos.search(access.listReach(), query.q, query)),
  });
  api.repoRoute({
    method: 'get',
    path: '/search/issues',
    // visibility here; the scope of each kind searched is checked below
    repo: {},
    tag: 'search',
    auth: 'public',
    operationId: 'searchIssues',
    summary:
      'Full-text search of the issues and pull requests of a repository (title and body; title matches first)',
    query: searchIssuesQuery,
    returns: respond.list(
      searchHitSchema,
      'matches in the title first, then the others; newest first within each (list items plus `kind`)',
    ),
    earlier: { returns: earlierSearchHitShape },
    errors: {
      403: 'a private repository and the token lacks issues:read (issues) or pulls:read (pull requests), or does not reach it',
    },
    handler: async ({ access, target, query }) => {
      const kinds: SearchKind[] = query.kind === undefined ? ['issue', 'pull'] : [query.kind];
      for (const kind of kinds) await access.authorize(target, { scope: READ[kind] });
      return reply.list(await search.search(target, query));
    },
  });
}
