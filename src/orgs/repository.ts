import { count, first, one, namesById, Prepared, type Db } from '../db/query.ts';
import { intArray } from '../db/sql.ts';
import type { Role } from '../domain/access.ts';
import type { OrgRef } from '../domain/repo.ts';

/** The queries of organizations and their memberships (tables `orgs`, `org_members`). */

export type OrgRow = { id: number; name: string; description: string; createdAt: Date | string };
export type MemberRow = { userId: number; role: Role };

const ORG = 'id, name, description, created_at as "createdAt"';
const MEMBER = 'user_id as "userId", role';

const BY_NAME = new Prepared<OrgRow>('org_by_name', `select ${ORG} from orgs where lower(name) = lower(?)`);
const REF_BY_NAME = new Prepared<OrgRef>(
  'org_ref_by_name',
  'select id, name from orgs where lower(name) = lower(?)',
);
const MEMBER_OF = new Prepared<MemberRow>(
  'org_member',
  `select ${MEMBER} from org_members where org_id = ? and user_id = ?`,
);

/** Organization names compare case-insensitively. */
export function orgByName(db: Db, name: string): Promise<OrgRow | undefined> {
  return BY_NAME.first(db, [name]);
}

export function orgById(db: Db, id: number): Promise<OrgRow | undefined> {
  return first<OrgRow>(db, `select ${ORG} from orgs where id = ?`, [id]);
}

export function refByName(db: Db, name: string): Promise<OrgRef | undefined> {
  return REF_BY_NAME.first(db, [name]);
}

export function namesByIds(db: Db, ids: readonly number[]): Promise<Map<number, string>> {
  return namesById(db, 'select id, name from orgs where id = any(?::int[])', ids);
}

export function insertOrg(db: Db, name: string, description: string): Promise<OrgRow> {
  return one<OrgRow>(db, `insert into orgs (name, description) values (?, ?) returning ${ORG}`, [
    name,
    description,
  ]);
}

/** Locks the organization's row: serialises membership changes (the last-owner rule). */
export async function lockOrg(tx: Db, id: number): Promise<void> {
  await tx.execute('select id from orgs where id = ? for update', [id]);
}

export function ownedCount(db: Db, userId: number): Promise<number> {
  return count(db, `select count(*) as n from org_members where user_id = ? and role = 'owner'`, [userId]);
}

export function member(db: Db, orgId: number, userId: number): Promise<MemberRow | undefined> {
  return MEMBER_OF.first(db, [orgId, userId]);
}

/** Every member of the organization. */
export function members(db: Db, orgId: number): Promise<MemberRow[]> {
  return db.execute<MemberRow[]>(`select ${MEMBER} from org_members where org_id = ?`, [orgId]);
}

/** Which of `userIds` are members of the organization, lowest id first. */
export async function memberIdsAmong(db: Db, orgId: number, userIds: readonly number[]): Promise<number[]> {
  if (userIds.length === 0) return [];
  const rows = await db.execute<{ user_id: number }[]>(
    'select user_id from org_members where org_id = ? and user_id = any(?::int[]) order by user_id',
    [orgId, intArray(userIds)],
  );
  return rows.map((r) => r.user_id);
}

export async function insertMember(db: Db, orgId: number, userId: number, role: Role): Promise<void> {
  await db.execute('insert into org_members (org_id, user_id, role) values (?, ?, ?)', [orgId, userId, role]);
}

export async function setRole(db: Db, orgId: number, userId: number, role: Role): Promise<void> {
  await db.execute('update org_members set role = ? where org_id = ? and user_id = ?', [role, orgId, userId]);
}

export async function deleteMember(db: Db, orgId: number, userId: number): Promise<void> {
  await db.execute('delete from org_members where org_id = ? and user_id = ?', [orgId, userId]);
}

export async function hasOtherOwner(db: Db, orgId: number, userId: number): Promise<boolean> {
  const rows = await db.execute(
    `select 1 from org_members where org_id = ? and role = 'owner' and user_id <> ? limit 1`,
    [orgId, userId],
  );
  return rows.length > 0;
}

// ----- lists -------------------------------------------------------------------------------------

/** One page of every organization, by name, and how many there are. */
export async function orgsPage(
  db: Db,
  limit: number,
  offset: number,
): Promise<{ rows: OrgRow[]; total: number }> {
  const total = await count(db, 'select count(*) as n from orgs');
  const rows = await db.execute<OrgRow[]>(`select ${ORG} from orgs order by lower(name) limit ? offset ?`, [
    limit,
    offset,
  ]);
  return { rows, total };
}

/** The organizations the user is a member of. */
export async function memberOrgIds(db: Db, userId: number): Promise<number[]> {
  const rows = await db.execute<{ org_id: number }[]>('select org_id from org_members where user_id = ?', [
    userId,
  ]);
  return rows.map((r) => r.org_id);
}

export type MembershipRow = OrgRow & { role: Role };

/** One page of the user's organizations (only `orgId` when given), by name, with the user's role. */
export async function membershipsPage(
  db: Db,
  userId: number,
  orgId: number | null,
  limit: number,
  offset: number,
): Promise<{ rows: MembershipRow[]; total: number }> {
  const where = `m.user_id = ?${orgId === null ? '' : ' and m.org_id = ?'}`;
  const params = orgId === null ? [userId] : [userId, orgId];
  const total = await count(db, `select count(*) as n from org_members m where ${where}`, params);
  const rows = await db.execute<MembershipRow[]>(
    `select o.id, o.name, o.description, o.created_at as "createdAt", m.role
       from org_members m join orgs o on o.id = m.org_id
      where ${where} order by lower(o.name) limit ? offset ?`,
    [...params, limit, offset],
  );
  return { rows, total };
}
