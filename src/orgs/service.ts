import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { Role } from '../domain/access.ts';
import type { OrgRef } from '../domain/repo.ts';
import { isUniqueViolation } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import type { UsersService } from '../users/service.ts';
import { userRefJson } from '../users/schemas.ts';
import * as db from './repository.ts';
import type { OrgRow } from './repository.ts';
import { orgJson, type CreateOrgBody, type MemberJson, type OrgJson, type UserOrgJson } from './schemas.ts';

export type { OrgRow };
export { RESERVED_ORG_NAMES } from './schemas.ts';

export class OrgsService {
  private readonly em: () => EntityManager;
  private readonly users: Pick<UsersService, 'lock' | 'page'>;
  private readonly maxOwned: number;

  constructor(deps: {
    em: () => EntityManager;
    users: Pick<UsersService, 'lock' | 'page'>;
    maxOrgsPerUser?: number;
  }) {
    this.em = deps.em;
    this.users = deps.users;
    this.maxOwned = deps.maxOrgsPerUser ?? 50;
  }

  async find(name: string): Promise<OrgRow | undefined> {
    return db.orgByName(this.em(), name);
  }

  async get(name: string): Promise<OrgRow> {
    const org = await this.find(name);
    if (org === undefined) throw ApiError.notFound('organization');
    return org;
  }

  async byId(id: number): Promise<OrgRow> {
    const org = await db.orgById(this.em(), id);
    if (org === undefined) throw ApiError.notFound('organization');
    return org;
  }

  async ref(name: string): Promise<OrgRef | undefined> {
    return db.refByName(this.em(), name);
  }

  /** Names of the organizations of `ids` that exist (one query). */
  async names(ids: readonly number[]): Promise<Map<number, string>> {
    return db.namesByIds(this.em(), [...new Set(ids)]);
  }

  async role(orgId: number, userId: number): Promise<Role | undefined> {
    return (await db.member(this.em(), orgId, userId))?.role;
  }

  /** Holds the organization's row lock until `tx` ends (serialises changes within it). */
  async lock(tx: Db, orgId: number): Promise<void> {
    await db.lockOrg(tx, orgId);
  }

  /** Which of `userIds` are members of the organization, lowest id first (one query). */
  async membersAmong(orgId: number, userIds: readonly number[]): Promise<number[]> {
    return db.memberIdsAmong(this.em(), orgId, userIds);
  }

  /**
   * Creates the organization with its creator as owner, in one transaction. `capped`: a creator
   * who already owns `maxOrgsPerUser` organizations gets 409 `limit_exceeded` (the creator's
   * row is locked, so concurrent creates cannot pass the cap).
   */
  async create(creatorId: number, body: CreateOrgBody, opts: { capped?: boolean } = {}): Promise<OrgRow> {
    const conflict = () => ApiError.conflict(`organization "${body.name}" already exists`);
    try {
      return await this.em().transactional(async (tx) => {
        if (opts.capped !== false) {
          await this.users.lock(tx, creatorId);
          if ((await db.ownedCount(tx, creatorId)) >= this.maxOwned) {
            throw ApiError.limitExceeded(
              `organization limit reached: a user may own at most ${this.maxOwned} organizations`,
            );
          }
        }
        if ((await db.refByName(tx, body.name)) !== undefined) throw conflict();
        const org = await db.insertOrg(tx, body.name, body.description ?? '');
        await db.insertMember(tx, org.id, creatorId, 'owner');
        return org;
      });
    } catch (e) {
      // Two concurrent creates both pass the check; the unique index stops the second one.
      if (isUniqueViolation(e)) throw conflict();
      throw e;
    }
  }

  /** One page of every organization, by name (case-insensitive). */
  async list(q: PageQuery): Promise<Page<OrgJson>> {
    const { rows, total } = await db.orgsPage(this.em(), q.per_page, offsetOf(q));
    return { items: rows.map(orgJson), total, page: q.page, perPage: q.per_page };
  }

  /** The organizations the user is a member of. */
  async memberOrgIds(userId: number): Promise<number[]> {
    return db.memberOrgIds(this.em(), userId);
  }

  /** One page of the user's organizations with the user's role, by name; `orgId`: only that one. */
  async forUser(userId: number, orgId: number | null, q: PageQuery): Promise<Page<UserOrgJson>> {
    const { rows, total } = await db.membershipsPage(this.em(), userId, orgId, q.per_page, offsetOf(q));
    return {
      items: rows.map((r) => ({ ...orgJson(r), role: r.role })),
      total,
      page: q.page,
      perPage: q.per_page,
    };
  }

  /** One page of the members, by username (case-insensitive), with their roles. */
  async members(orgId: number, q: PageQuery): Promise<Page<MemberJson>> {
    const all = await db.members(this.em(), orgId);
    const roles = new Map(all.map((m) => [m.userId, m.role]));
    const users = await this.users.page([...roles.keys()], q.per_page, offsetOf(q));
    const items = users.flatMap((u): MemberJson[] => {
      const role = roles.get(u.id);
      return role === undefined ? [] : [{ user: { ...userRefJson(u), email: u.email }, role }];
    });
    return { items, total: all.length, page: q.page, perPage: q.per_page };
  }

  /** Adds a member or changes a role; the last owner cannot be demoted (409). */
  async setMember(orgId: number, userId: number, role: Role): Promise<{ role: Role; created: boolean }> {
    return this.em().transactional(async (tx) => {
      await db.lockOrg(tx, orgId);
      const existing = await db.member(tx, orgId, userId);
      if (existing === undefined) {
        await db.insertMember(tx, orgId, userId, role);
        return { role, created: true };
      }
      if (existing.role === 'owner' && role !== 'owner') await this.assertAnotherOwner(tx, orgId, userId);
      if (existing.role !== role) await db.setRole(tx, orgId, userId, role);
      return { role, created: false };
    });
  }

  async removeMember(orgId: number, userId: number): Promise<void> {
    await this.em().transactional(async (tx) => {
      await db.lockOrg(tx, orgId);
      const existing = await db.member(tx, orgId, userId);
      if (existing === undefined) throw ApiError.notFound('member');
      if (existing.role === 'owner') await this.assertAnotherOwner(tx, orgId, userId);
      await db.deleteMember(tx, orgId, userId);
    });
  }

  private async assertAnotherOwner(tx: EntityManager, orgId: number, userId: number): Promise<void> {
    if (!(await db.hasOtherOwner(tx, orgId, userId))) {
      throw ApiError.conflict('an organization must keep at least one owner');
    }
  }
}
