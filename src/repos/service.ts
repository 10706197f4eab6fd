import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ApiError } from '../http/errors.ts';
import { scopeAllows, type Access, type OrgRef, type RepoRef } from '../http/auth.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { driverFor, removeRepository, repoPath, VCS_KINDS, type VcsKind } from '../vcs/index.ts';
import { Repo } from './entities.ts';
import type { ChangedRepo } from './changes.ts';
import type { RepoJson } from './schemas.ts';

export const repoNameSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(
    /^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?$/,
    'letters, digits, ".", "_" and "-"; no leading "." or "-"',
  )
  .refine((n) => !n.toLowerCase().endsWith('.git'), 'must not end with ".git"')
  .refine((n) => n !== '.' && n !== '..', 'reserved name');

export const createRepoBody = z.object({
  name: repoNameSchema,
  description: z.string().max(10_000).optional(),
  is_private: z.boolean().optional(),
  vcs: z.enum(VCS_KINDS).optional(),
});
export const updateRepoBody = z
  .object({ description: z.string().max(10_000).optional(), is_private: z.boolean().optional() })
  .strict();

export class ReposService {
  private readonly em: () => EntityManager;
  private readonly root: string;
  private readonly baseUrl: () => string;

  constructor(deps: { em: () => EntityManager; repoDir: string; baseUrl: () => string }) {
    this.em = deps.em;
    this.root = deps.repoDir;
    this.baseUrl = deps.baseUrl;
  }

  json(r: Repo, orgName: string): RepoJson {
    return {
      id: r.id,
      name: r.name,
      org: orgName,
      description: r.description,
      is_private: r.isPrivate,
      vcs: r.vcs as VcsKind,
      default_branch: r.defaultBranch,
      clone_url: `${this.baseUrl()}/${orgName}/${r.name}`,
      created_at: r.createdAt.toISOString(),
      updated_at: r.updatedAt.toISOString(),
    };
  }

  path(r: Pick<Repo, 'id' | 'vcs'>): string {
    return repoPath(this.root, r.id, r.vcs as VcsKind);
  }

  /** The repository as `RepoChanges` changes it. */
  changed(r: Repo, orgName: string): ChangedRepo {
    return {
      id: r.id,
      vcs: r.vcs as VcsKind,
      path: this.path(r),
      defaultBranch: r.defaultBranch,
      org: orgName,
      name: r.name,
    };
  }

  async ref(org: OrgRef, name: string): Promise<RepoRef | undefined> {
    const rows = await this.em().execute<{ id: number; org_id: number; name: string; is_private: boolean }[]>(
      'select id, org_id, name, is_private from repos where org_id = ? and lower(name) = lower(?)',
      [org.id, name],
    );
    const r = rows[0];
    return r === undefined ? undefined : { id: r.id, orgId: r.org_id, name: r.name, isPrivate: r.is_private };
  }

  async get(id: number): Promise<Repo> {
    const r = await this.em().findOne(Repo, { id });
    if (r === null) throw ApiError.notFound('repository');
    return r;
  }

  /**
   * Repositories of an org that the caller can see: public ones, plus private ones it may read
   * (`GET /repos/:org/:repo` answers them): a member whose token has repo:read and reaches them.
   */
  async listForOrg(org: OrgRef, access: Access, q: PageQuery): Promise<Page<RepoJson>> {
    const p = access.principal;
    let privateFilter = 'false';
    const params: unknown[] = [org.id];
    const reads = p.kind === 'user' && scopeAllows(p.grant.scopes, 'repo:read');
    if (reads && p.kind === 'user' && (await access.roleIn(org.id)) !== undefined) {
      if (p.grant.level === 'personal' || (p.grant.level === 'org' && p.grant.targetOrgId === org.id)) {
        privateFilter = 'true';
      } else if (p.grant.level === 'repo' && p.grant.targetRepoId !== null) {
        privateFilter = 'id = ?';
        params.push(p.grant.targetRepoId);
      }
    }
    const where = `org_id = ? and (not is_private or ${privateFilter})`;
    const em = this.em();
    const [count] = await em.execute<{ n: string }[]>(
      `select count(*) as n from repos where ${where}`,
      params,
    );
    const ids = await em.execute<{ id: number }[]>(
      `select id from repos where ${where} order by lower(name) limit ? offset ?`,
      [...params, q.per_page, offsetOf(q)],
    );
    const repos = await em.find(Repo, { id: { $in: ids.map((r) => r.id) } });
    const byId = new Map(repos.map((r) => [r.id, r]));
    const items = ids.flatMap((r) => {
      const repo = byId.get(r.id);
      return repo === undefined ? [] : [this.json(repo, org.name)];
    });
    return { items, total: Number(count?.n ?? 0), page: q.page, perPage: q.per_page };
  }

  /** Inserts the row and creates the storage in one transaction: a failed init leaves nothing. */
  async create(org: OrgRef, body: z.infer<typeof createRepoBody>): Promise<Repo> {
    const vcs = body.vcs ?? 'hg';
    let created: string | undefined;
    try {
      return await this.em().transactional(async (tx) => {
        await tx.execute('select id from orgs where id = ? for update', [org.id]);
        const taken = await tx.execute('select 1 from repos where org_id = ? and lower(name) = lower(?)', [
          org.id,
          body.name,
        ]);
        if (taken.length > 0) throw ApiError.conflict(`repository "${org.name}/${body.name}" already exists`);
        const repo = tx.create(Repo, {
          orgId: org.id,
          name: body.name,
          description: body.description ?? '',
          isPrivate: body.is_private ?? false,
          vcs,
          defaultBranch: driverFor(vcs).constants.defaultBranch,
        });
        await tx.flush();
        created = this.path(repo);
        await removeRepository(created);
        await driverFor(vcs).init(created);
        return repo;
      });
    } catch (e) {
      if (created !== undefined) await removeRepository(created);
      throw e;
    }
  }

  async update(id: number, body: z.infer<typeof updateRepoBody>): Promise<Repo> {
    const em = this.em();
    const repo = await this.get(id);
    if (body.description !== undefined) repo.description = body.description;
    if (body.is_private !== undefined) repo.isPrivate = body.is_private;
    repo.updatedAt = new Date();
    await em.flush();
    return repo;
  }

  /** Deletes every row of the repository (cascading) and then its storage. */
  async delete(id: number): Promise<void> {
    const repo = await this.get(id);
    const dir = this.path(repo);
    await this.em().transactional(async (tx) => {
      await tx.execute('delete from repos where id = ?', [id]);
    });
    await removeRepository(dir);
  }
}
