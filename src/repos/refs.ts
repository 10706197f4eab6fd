import { reply, respond, type Api } from '../http/api.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { pageQuery, type Page, type PageQuery } from '../http/pagination.ts';
import type { Vcs } from '../vcs/index.ts';
import type { RefEntry, RefType } from '../vcs/reader.ts';
import type { ReposService } from './service.ts';
import type { CommitRevs } from './commit-revs.ts';
import { refSchema } from './schemas.ts';
import { earlierRefShape } from './earlier.ts';

/**
 * The ref lists of a repository (branches, bookmarks, tags), each ref with its head commit, read
 * through the repository's pooled reader. Decisions where the contract is silent: names in byte
 * order (as `git branch` lists them), the default branch marked where it falls, not moved first;
 * a kind without bookmarks answers 404 for them; an empty repository has empty lists.
 */
export class RefsService {
  private readonly repos: Pick<ReposService, 'handle'>;
  private readonly vcs: Pick<Vcs, 'reader'>;
  private readonly revs: Pick<CommitRevs, 'of'> | undefined;

  constructor(repos: Pick<ReposService, 'handle'>, vcs: Pick<Vcs, 'reader'>, revs?: Pick<CommitRevs, 'of'>) {
    this.repos = repos;
    this.vcs = vcs;
    this.revs = revs;
  }

  /** With `revs`, each ref's commit also has its `rev` (the earlier API variant). */
  async list(
    target: RepoTarget,
    type: RefType,
    q: PageQuery,
    opts: { revs?: boolean } = {},
  ): Promise<Page<RevvedRef>> {
    const h = await this.repos.handle(target);
    const out = await this.vcs.reader(h.vcs, h.path).refs(type, q.page, q.per_page, h.defaultBranch);
    if (out === undefined)
      throw new ApiError(404, 'not_found', `${h.driver.constants.label} repositories have no ${type}s`);
    let items: RevvedRef[] = out.entries;
    if (opts.revs === true && this.revs !== undefined && items.length > 0) {
      const revs = await this.revs.of(
        h,
        items.map((e) => e.commit.id),
      );
      items = items.map((e) => ({ ...e, commit: { ...e.commit, rev: revs.get(e.commit.id) } }));
    }
    return { items, total: out.total, page: q.page, perPage: q.per_page };
  }
}

/** A ref whose commit may carry its `rev` (the earlier API variant). */
export type RevvedRef = Omit<RefEntry, 'commit'> & {
  commit: RefEntry['commit'] & { rev?: number | undefined };
};

const NO_READ = 'a private repository and the token lacks repo:read or does not reach it';

/** `GET .../branches`, `.../bookmarks` and `.../tags` under /api/v1/repos/:org/:repo. */
export function refRoutes(api: Api, svc: RefsService): void {
  const lists = [
    {
      type: 'branch',
      path: '/branches',
      operationId: 'listBranches',
      summary:
        'Branches with their head commits, by name, the default branch marked (Mercurial: open named branches at their newest open head; Fossil: open branches)',
      notFound: 'no such repository',
    },
    {
      type: 'bookmark',
      path: '/bookmarks',
      operationId: 'listBookmarks',
      summary: 'Mercurial bookmarks with their commits, by name, `@` marked as the default',
      notFound: 'no such repository, or not a Mercurial repository (Git and Fossil have no bookmarks)',
    },
    {
      type: 'tag',
      path: '/tags',
      operationId: 'listTags',
      summary: 'Tags with the commits they name, by name (Mercurial: without `tip`)',
      notFound: 'no such repository',
    },
  ] as const;
  for (const l of lists) {
    api.repoRoute({
      repo: { scope: 'repo:read' },
      method: 'get',
      path: l.path,
      tag: 'contents',
      auth: 'public',
      operationId: l.operationId,
      summary: l.summary,
      query: pageQuery(),
      returns: respond.list(refSchema, `${l.type}s, by name`),
      earlier: { returns: earlierRefShape },
      errors: { 403: NO_READ, 404: l.notFound },
      handler: async ({ target, query, variant }) =>
        reply.list(await svc.list(target, l.type, query, { revs: variant === 'earlier' })),
    });
  }
}
