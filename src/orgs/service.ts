import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ApiError } from '../http/errors.ts';
import type { OrgRef, Role } from '../http/auth.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { isUniqueViolation, userRefJson } from '../users/service.ts';
import { User } from '../users/entities.ts';
import { Org, OrgMember } from './entities.ts';
import type { MemberJson, OrgJson } from './schemas.ts';

/** Names that would shadow server routes at the root (clone URLs live at /:org/:repo). */
export const RESERVED_ORG_NAMES = new Set(['api', 'healthz', 'readyz', 'metrics']);

export const orgNameSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(
    /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/,
    'letters, digits, ".", "_" and "-", not at either end',
  )
  .refine((n) => !RESERVED_ORG_NAMES.has(n.toLowerCase()), 'this name is reserved');

export const createOrgBody = z.object({
  name: orgNameSchema,
  description: z.string().max(10_000).optional(),
});
export const memberBody = z.object({ role: z.enum(['owner', 'member']) });

export function orgJson(o: Org): OrgJson {
  return { id: o.id, name: o.name, description: o.description, created_at: o.createdAt.toISOString() };
}

export class OrgsService {
  private readonly em: () => EntityManager;
  private readonly maxOwned: number;

  constructor(deps: { em: () => EntityManager; maxOrgsPerUser?: number }) {
    this.em = deps.em;
    this.maxOwned = deps.maxOrgsPerUser ?? 50;
  }

  async find(name: string): Promise<Org | undefined> {
    const rows = await this.em().execute<{ id: number }[]>(
      'select id from orgs where lower(name) = lower(?)',
      [name],
    );
    if (rows[0] === undefined) return undefined;
    return (await this.em().findOne(Org, { id: rows[0].id })) ?? undefined;
  }

  async get(name: string): Promise<Org> {
    const org = await this.find(name);
    if (org === undefined) throw ApiError.notFound('organization');
    return org;
  }

  async byId(id: number): Promise<Org> {
    const org = await this.em().findOne(Org, { id });
    if (org === null) throw ApiError.notFound('organization');
    return org;
  }

  async ref(name: string): Promise<OrgRef | undefined> {
    const rows = await this.em().execute<OrgRef[]>('select id, name from orgs where lower(name) = lower(?)', [
      name,
    ]);
    return rows[0];
  }

  async role(orgId: number, userId: number): Promise<Role | undefined> {
    const rows = await this.em().execute<{ role: Role }[]>(
      'select role from org_members where org_id = ? and user_id = ?',
      [orgId, userId],
    );
    return rows[0]?.role;
  }

  /**
   * Creates the organization with its creator as owner, in one transaction. `capped`: a creator
   * who already owns `maxOrgsPerUser` organizations gets 409 `limit_exceeded` (the creator's
   * row is locked, so concurrent creates cannot pass the cap).
   */
  async create(
    creatorId: number,
    body: z.infer<typeof createOrgBody>,
    opts: { capped?: boolean } = {},
  ): Promise<Org> {
    const conflict = () => ApiError.conflict(`organization "${body.name}" already exists`);
    try {
      return await this.em().transactional(async (tx) => {
        if (opts.capped !== false) {
          await tx.execute('select id from users where id = ? for no key update', [creatorId]);
          const [owned] = await tx.execute<{ n: string }[]>(
            `select count(*) as n from org_members where user_id = ? and role = 'owner'`,
            [creatorId],
          );
          if (Number(owned?.n ?? 0) >= this.maxOwned) {
            throw ApiError.limitExceeded(
              `organization limit reached: a user may own at most ${this.maxOwned} organizations`,
            );
          }
        }
        const taken = await tx.execute('select 1 from orgs where lower(name) = lower(?)', [body.name]);
        if (taken.length > 0) throw conflict();
        const org = tx.create(Org, { name: body.name, description: body.description ?? '' });
        await tx.flush();
        tx.create(OrgMember, { orgId: org.id, userId: creatorId, role: 'owner' });
        await tx.flush();
        return org;
      });
    } catch (e) {
      // Two concurrent creates both pass the check; the unique index stops the second one.
      if (isUniqueViolation(e)) throw conflict();
      throw e;
    }
  }

  async members(orgId: number, q: PageQuery): Promise<Page<MemberJson>> {
    const em = this.em();
    const [count] = await em.execute<{ n: string }[]>(
      'select count(*) as n from org_members where org_id = ?',
      [orgId],
    );
    const rows = await em.execute<{ user_id: number; role: Role }[]>(
      `select m.user_id, m.role from org_members m join users u on u.id = m.user_id
        where m.org_id = ? order by lower(u.username) limit ? offset ?`,
      [orgId, q.per_page, offsetOf(q)],
    );
    const users = await em.find(User, { id: { $in: rows.map((r) => r.user_id) } });
    const byId = new Map(users.map((u) => [u.id, u]));
    const items = rows.flatMap((r): MemberJson[] => {
      const u = byId.get(r.user_id);
      return u === undefined ? [] : [{ user: { ...userRefJson(u), email: u.email }, role: r.role }];
    });
    return { items, total: Number(count?.n ?? 0), page: q.page, perPage: q.per_page };
  }

  /** Adds a member or changes a role; the last owner cannot be demoted (409). */
  async setMember(orgId: number, userId: number, role: Role): Promise<{ role: Role; created: boolean }> {
    return this.em().transactional(async (tx) => {
      await tx.execute('select id from orgs where id = ? for update', [orgId]);
      const existing = await tx.findOne(OrgMember, { orgId, userId });
      if (existing === null) {
        tx.create(OrgMember, { orgId, userId, role });
        await tx.flush();
        return { role, created: true };
      }
      if (existing.role === 'owner' && role !== 'owner') await this.assertAnotherOwner(tx, orgId, userId);
      existing.role = role;
      await tx.flush();
      return { role, created: false };
    });
  }

  async removeMember(orgId: number, userId: number): Promise<void> {
    await this.em().transactional(async (tx) => {
      await tx.execute('select id from orgs where id = ? for update', [orgId]);
      const existing = await tx.findOne(OrgMember, { orgId, userId });
      if (existing === null) throw ApiError.notFound('member');
      if (existing.role === 'owner') await this.assertAnotherOwner(tx, orgId, userId);
      tx.remove(existing);
      await tx.flush();
    });
  }

  private async assertAnotherOwner(tx: EntityManager, orgId: number, userId: number): Promise<void> {
    const others = await tx.execute(
      `select 1 from org_members where org_id = ? and role = 'owner' and user_id <> ? limit 1`,
      [orgId, userId],
    );
    if (others.length === 0) throw ApiError.conflict('an organization must keep at least one owner');
  }
}
