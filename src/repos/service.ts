import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { ListReach } from '../domain/access.ts';
import type { OrgRef, PrivateShown, RepoHandle, RepoRef, RepoTarget } from '../domain/repo.ts';
import { isoTime } from '../db/sql.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { repoPath, type Vcs } from '../vcs/index.ts';
import type { OrgsService } from '../orgs/service.ts';
import * as db from './repository.ts';
import type { RepoRow } from './repository.ts';
import type { VcsKind } from '../vcs/constants.ts';
import type { CreateRepoBody, RepoJson, UpdateRepoBody } from './schemas.ts';

export type { RepoRow };
/** Chooses the storage node of a new repository (in its creating transaction). */
export type Placement = { pick(tx: EntityManager): Promise<string> };
/** A repository with when it last changed (a push, merge or tag; null before the first). */
export type RecentRepoJson = RepoJson & { pushed_at: string | null };

export class ReposService {
  private readonly em: () => EntityManager;
  private readonly orgs: Pick<OrgsService, 'lock' | 'memberOrgIds'>;
  private readonly root: string;
  private readonly baseUrl: () => string;
  private readonly vcs: Pick<Vcs, 'driver' | 'remove'>;
  /** With storage nodes: which node a new repository goes to (undefined: the server's own directory). */
  private readonly placement: Placement | undefined;
  /** What else holds a repository's files by its storage path (the raw cache): cleared on delete. */
  private readonly forget: ((dir: string) => Promise<void>) | undefined;

  constructor(deps: {
    em: () => EntityManager;
    orgs: Pick<OrgsService, 'lock' | 'memberOrgIds'>;
    repoDir: string;
    baseUrl: () => string;
    vcs: Pick<Vcs, 'driver' | 'remove'>;
    forget?: (dir: string) => Promise<void>;
    placement?: Placement;
  }) {
    this.placement = deps.placement;
    this.em = deps.em;
    this.orgs = deps.orgs;
    this.root = deps.repoDir;
    this.baseUrl = deps.baseUrl;
    this.vcs = deps.vcs;
    this.forget = deps.forget;
  }

  json(r: RepoRow, orgName: string): RepoJson {
    return {
      id: r.id,
      name: r.name,
      org: orgName,
      description: r.description,
      is_private: r.isPrivate,
      vcs: r.vcs,
      default_branch: r.defaultBranch,
      clone_url: this.cloneUrl(orgName, r.name),
      created_at: isoTime(r.createdAt),
      updated_at: isoTime(r.updatedAt),
    };
  }

  /** The repository's clone URL (also its web home). */
  cloneUrl(orgName: string, name: string): string {
    return `${this.baseUrl()}/${orgName}/${name}`;
  }

  /**
   * Where its storage is: a path under the server's repository directory, or with storage nodes
   * `<node>/<id>.<kind>`, which the remote driver sends to that node (vcs/remote/).
   */
  path(r: Pick<RepoRow, 'id' | 'vcs'> & { storageNode?: string | null }): string {
    if (r.storageNode !== null && r.storageNode !== undefined) return `${r.storageNode}/${r.id}.${r.vcs}`;
    return repoPath(this.root, r.id, r.vcs);
  }

  /** The node the repository's row names now (the remote driver's question after a move). */
  async storageNodeOf(id: number): Promise<string | undefined> {
    return db.storageNodeOf(this.em().fork(), id);
  }

  /** Points the repository at another node (a move, once the copy there was verified). */
  async setStorageNode(id: number, node: string): Promise<void> {
    // committed at once, outside any transaction of the caller (a move runs inside the one that
    // holds the push lock): servers must follow the row before the old copy goes
    await db.setStorageNode(this.em().fork(), id, node);
  }

  /** The repositories a storage node holds by their rows. */
  async onNode(node: string): Promise<{ id: number; vcs: VcsKind }[]> {
    return db.reposOnNode(this.em(), node);
  }

  /** The repository to read or change: where it is stored and its driver (see domain/repo.ts). */
  handleOf(r: RepoRow, orgName: string): RepoHandle {
    return {
      id: r.id,
      orgId: r.orgId,
      org: orgName,
      name: r.name,
      isPrivate: r.isPrivate,
      vcs: r.vcs,
      defaultBranch: r.defaultBranch,
      path: this.path(r),
      driver: this.vcs.driver(r.vcs),
    };
  }

  /** The handle of a repository a route resolved (404 when it was deleted since). */
  async handle(t: RepoTarget): Promise<RepoHandle> {
    return this.handleOf(await this.get(t.repo.id), t.org.name);
  }

  /** The handle of a repository by id (one statement), or undefined when it does not exist. */
  async findHandle(id: number): Promise<RepoHandle | undefined> {
    const r = await db.repoWithOrg(this.em(), id);
    return r === undefined ? undefined : this.handleOf(r, r.orgName);
  }

  /** `findHandle`, with 404 for a missing repository. */
  async handleById(id: number): Promise<RepoHandle> {
    const h = await this.findHandle(id);
    if (h === undefined) throw ApiError.notFound('repository');
    return h;
  }

  async ref(org: OrgRef, name: string): Promise<RepoRef | undefined> {
    return db.refByName(this.em(), org.id, name);
  }

  /** The repository `orgName/name` and its organization (one statement), or undefined. */
  async target(orgName: string, name: string): Promise<RepoTarget | undefined> {
    return db.targetByNames(this.em(), orgName, name);
  }

  async get(id: number): Promise<RepoRow> {
    const r = await db.repoById(this.em(), id);
    if (r === undefined) throw ApiError.notFound('repository');
    return r;
  }

  /** Names of the repositories of `ids` that exist (one query). */
  async names(ids: readonly number[]): Promise<Map<number, string>> {
    return db.namesByIds(this.em(), [...new Set(ids)]);
  }

  /** Repositories of an org: the public ones and the private ones in `shown` (what the caller may read). */
  async listForOrg(org: OrgRef, shown: PrivateShown, q: PageQuery): Promise<Page<RepoJson>> {
    const { rows, total } = await db.page(this.em(), org.id, shown, q.per_page, offsetOf(q));
    return { items: rows.map((r) => this.json(r, org.name)), total, page: q.page, perPage: q.per_page };
  }

  /**
   * Repositories whose name contains `text` or whose description matches its words: every
   * public one, and the private ones the caller may read (see `privateScope`).
   */
  async search(reach: ListReach, text: string, q: PageQuery): Promise<Page<RepoJson>> {
    const scope = await this.privateScope(reach);
    const { rows, total } = await db.searchPage(this.em(), text, scope, q.per_page, offsetOf(q));
    return this.pageOf(rows, total, q);
  }

  /**
   * Repositories of the caller's organizations (of `orgId` only, when given) as far as its token
   * reaches: an organization token, that organization's; a repository token, that repository.
   * Private ones need `repo:read`. `visibility` keeps only public or only private ones.
   */
  async forUser(
    reach: ListReach & { userId: number },
    filter: { orgId?: number | undefined; visibility?: 'public' | 'private' | undefined },
    q: PageQuery,
  ): Promise<Page<RepoJson>> {
    const empty: Page<RepoJson> = { items: [], total: 0, page: q.page, perPage: q.per_page };
    let orgIds = await this.orgs.memberOrgIds(reach.userId);
    if (reach.orgId !== null) orgIds = orgIds.filter((id) => id === reach.orgId);
    if (filter.orgId !== undefined) orgIds = orgIds.filter((id) => id === filter.orgId);
    if (orgIds.length === 0) return empty;
    const scope: db.RepoScope = { privateOrgIds: reach.privateRepos ? orgIds : [], privateRepoId: null };
    const { rows, total } = await db.orgsReposPage(
      this.em(),
      orgIds,
      scope,
      { repoId: reach.repoId, visibility: filter.visibility },
      q.per_page,
      offsetOf(q),
    );
    return this.pageOf(rows, total, q);
  }

  /**
   * Repositories the caller may see, most recently pushed first (`pushed_at`: the last push,
   * merge or tag, null before the first): every one, or (`mine`) those of the caller's
   * organizations.
   */
  async recent(reach: ListReach, mine: boolean, q: PageQuery): Promise<Page<RecentRepoJson>> {
    const scope = await this.privateScope(reach);
    const orgIds =
      mine && reach.userId !== undefined ? await this.orgs.memberOrgIds(reach.userId) : undefined;
    if (mine && (orgIds === undefined || orgIds.length === 0)) {
      return { items: [], total: 0, page: q.page, perPage: q.per_page };
    }
    const { rows, total } = await db.recentPage(this.em(), scope, orgIds, q.per_page, offsetOf(q));
    const items = rows.map((r) => ({
      ...this.json(r, r.orgName),
      pushed_at: r.pushedAt === null ? null : isoTime(r.pushedAt),
    }));
    return { items, total, page: q.page, perPage: q.per_page };
  }

  /**
   * The private repositories a caller may read, across organizations (what `Access.canSee`
   * allows with `repo:read`): none without a token holding it; for a site administrator those
   * of every organization, for anyone else those of the organizations they are a member of;
   * an organization or repository token narrows that to its organization or repository.
   */
  private async privateScope(reach: ListReach): Promise<db.RepoScope> {
    if (reach.userId === undefined || !reach.privateRepos) return { privateOrgIds: [], privateRepoId: null };
    let ids: number[] | 'all' = reach.siteAdmin ? 'all' : await this.orgs.memberOrgIds(reach.userId);
    const only = reach.orgId;
    if (only !== null) ids = ids === 'all' || ids.includes(only) ? [only] : [];
    return { privateOrgIds: ids, privateRepoId: reach.repoId };
  }

  private pageOf(rows: db.RepoWithOrg[], total: number, q: PageQuery): Page<RepoJson> {
    return { items: rows.map((r) => this.json(r, r.orgName)), total, page: q.page, perPage: q.per_page };
  }

  /** Inserts the row and creates the storage in one transaction: a failed init leaves nothing. */
  async create(org: OrgRef, body: CreateRepoBody): Promise<RepoRow> {
    const vcs = body.vcs ?? 'hg';
    let created: string | undefined;
    try {
      return await this.em().transactional(async (tx) => {
        await this.orgs.lock(tx, org.id);
        if ((await db.refByName(tx, org.id, body.name)) !== undefined) {
          throw ApiError.conflict(`repository "${org.name}/${body.name}" already exists`);
        }
        const repo = await db.insertRepo(tx, {
          orgId: org.id,
          name: body.name,
          description: body.description ?? '',
          isPrivate: body.is_private ?? false,
          vcs,
          defaultBranch: this.vcs.driver(vcs).constants.defaultBranch,
          storageNode: this.placement === undefined ? null : await this.placement.pick(tx),
        });
        created = this.path(repo);
        await this.vcs.remove(created);
        await this.vcs.driver(vcs).init(created, `${org.name}/${body.name}`);
        return repo;
      });
    } catch (e) {
      if (created !== undefined) await this.vcs.remove(created).catch(() => undefined);
      throw e;
    }
  }

  async update(id: number, body: UpdateRepoBody): Promise<RepoRow> {
    const repo = await db.updateRepo(this.em(), id, {
      description: body.description,
      isPrivate: body.is_private,
    });
    if (repo === undefined) throw ApiError.notFound('repository');
    return repo;
  }

  /** Deletes every row of the repository (cascading), then its storage and what is kept of its files. */
  async delete(id: number): Promise<void> {
    const repo = await this.get(id);
    const dir = this.path(repo);
    await this.em().transactional(async (tx) => {
      await db.deleteRepo(tx, id);
    });
    // a storage node that cannot be reached keeps an orphan copy: harmless (nothing names it), and
    // the deletion is not undone for it
    await this.vcs.remove(dir).catch(() => undefined);
    await this.forget?.(dir);
  }
}
