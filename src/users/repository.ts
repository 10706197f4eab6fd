import { count, first, one, namesById, Prepared, type Db } from '../db/query.ts';
import { intArray, textArray } from '../db/sql.ts';
import type { TokenLevel } from '../domain/access.ts';
import type { ApiVariant } from '../domain/variant.ts';

/** The queries of users and their API tokens (tables `users`, `api_tokens`). */

/** A user (rows leave the feature, so they are camelCase records like the other features' rows). */
export type UserRow = {
  id: number;
  username: string;
  email: string;
  displayName: string;
  isAdmin: boolean;
  avatarUrl: string;
  createdAt: Date | string;
};
/** What other objects show of a user (authors, assignees, members). */
export type UserRefRow = Pick<UserRow, 'id' | 'username' | 'displayName' | 'avatarUrl'>;

export type TokenRow = {
  id: number;
  userId: number;
  name: string;
  scopes: string[];
  level: TokenLevel;
  targetOrgId: number | null;
  targetRepoId: number | null;
  expiresAt: Date | string | null;
  createdAt: Date | string;
  lastUsedAt: Date | string | null;
  /** The API variant the token's requests are answered in; null: the server's default. */
  apiVariant: ApiVariant | null;
};

/** A token with its user, as authentication reads it. */
export type GrantRow = Pick<
  TokenRow,
  'id' | 'scopes' | 'level' | 'targetOrgId' | 'targetRepoId' | 'expiresAt' | 'apiVariant'
> & {
  userId: number;
  username: string;
  isAdmin: boolean;
  pipeline: boolean;
};

const USER_REF = 'id, username, display_name as "displayName", avatar_url as "avatarUrl"';
const USER = `${USER_REF}, email, is_admin as "isAdmin", created_at as "createdAt"`;
const TOKEN_GRANT = `id, scopes, level, target_org_id as "targetOrgId", target_repo_id as "targetRepoId",
  expires_at as "expiresAt", api_variant as "apiVariant"`;
const TOKEN = `${TOKEN_GRANT}, user_id as "userId", name, created_at as "createdAt",
  last_used_at as "lastUsedAt"`;

// ----- users -------------------------------------------------------------------------------------

export function userById(db: Db, id: number): Promise<UserRow | undefined> {
  return first<UserRow>(db, `select ${USER} from users where id = ?`, [id]);
}

/** Usernames compare case-insensitively. */
export function userByName(db: Db, username: string): Promise<UserRow | undefined> {
  return first<UserRow>(db, `select ${USER} from users where lower(username) = lower(?)`, [username]);
}

export function insertUser(
  db: Db,
  u: { username: string; email: string; displayName: string; isAdmin: boolean; passwordHash?: string },
): Promise<UserRow> {
  return one<UserRow>(
    db,
    `insert into users (username, email, display_name, is_admin, avatar_url, password_hash)
     values (?, ?, ?, ?, '', ?) returning ${USER}`,
    [u.username, u.email, u.displayName, u.isAdmin, u.passwordHash ?? null],
  );
}

export async function makeAdmin(db: Db, id: number): Promise<void> {
  await db.execute('update users set is_admin = true where id = ?', [id]);
}

export async function anyUser(db: Db): Promise<boolean> {
  return (await db.execute('select 1 from users limit 1')).length > 0;
}

/**
 * Locks the user's row until the transaction ends. Foreign-key checks do not wait for this lock
 * mode, so it serialises only the caller's own capped creates (tokens, organizations).
 */
export async function lockUser(tx: Db, id: number): Promise<void> {
  await tx.execute('select id from users where id = ? for no key update', [id]);
}

/** Serialises the bootstrap of the first administrator across processes. */
export async function lockAdminBootstrap(tx: Db): Promise<void> {
  await tx.execute('select pg_advisory_xact_lock(?)', [0x61646d6e]);
}

export async function refsByIds(db: Db, ids: readonly number[]): Promise<UserRefRow[]> {
  if (ids.length === 0) return [];
  return db.execute<UserRefRow[]>(`select ${USER_REF} from users where id = any(?::int[])`, [intArray(ids)]);
}

export function usernamesByIds(db: Db, ids: readonly number[]): Promise<Map<number, string>> {
  return namesById(db, 'select id, username as name from users where id = any(?::int[])', ids);
}

/** Users among `ids`, by username (case-insensitive), one page. */
export function usersPage(db: Db, ids: readonly number[], limit: number, offset: number): Promise<UserRow[]> {
  return db.execute<UserRow[]>(
    `select ${USER} from users where id = any(?::int[]) order by lower(username) limit ? offset ?`,
    [intArray(ids), limit, offset],
  );
}

/** Display names compare case-insensitively and need not be unique. */
export async function idsByDisplayName(db: Db, name: string, limit?: number): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    `select id from users where lower(display_name) = lower(?) order by id${limit === undefined ? '' : ' limit ?'}`,
    limit === undefined ? [name] : [name, limit],
  );
  return rows.map((r) => r.id);
}

/** Users whose username or display name is `name` (case-insensitive). */
export async function idsByName(db: Db, name: string): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    'select id from users where lower(username) = lower(?) or lower(display_name) = lower(?) order by id',
    [name, name],
  );
  return rows.map((r) => r.id);
}

// ----- tokens ------------------------------------------------------------------------------------

/** Tokens the user holds (CI clone credentials not counted). */
export function heldTokens(db: Db, userId: number): Promise<number> {
  return count(db, 'select count(*) as n from api_tokens where user_id = ? and pipeline_id is null', [
    userId,
  ]);
}

export type NewToken = {
  userId: number;
  name: string;
  hash: string;
  scopes: readonly string[];
  level: TokenLevel;
  targetOrgId: number | null;
  targetRepoId: number | null;
  expiresAt: Date | null;
  pipelineId?: number;
  apiVariant?: ApiVariant | null;
};

export function insertToken(db: Db, t: NewToken): Promise<TokenRow> {
  return one<TokenRow>(
    db,
    `insert into api_tokens (user_id, name, token_hash, scopes, level, target_org_id, target_repo_id,
                             expires_at, pipeline_id, api_variant)
     values (?, ?, ?, ?::text[], ?, ?, ?, ?, ?, ?) returning ${TOKEN}`,
    [
      t.userId,
      t.name,
      t.hash,
      textArray(t.scopes),
      t.level,
      t.targetOrgId,
      t.targetRepoId,
      t.expiresAt,
      t.pipelineId ?? null,
      t.apiVariant ?? null,
    ],
  );
}

export function tokenByHash(db: Db, hash: string): Promise<TokenRow | undefined> {
  return first<TokenRow>(db, `select ${TOKEN} from api_tokens where token_hash = ?`, [hash]);
}

/** Makes a token personal, unlimited and never expiring, with `scopes`. */
export async function widenToken(db: Db, id: number, scopes: readonly string[]): Promise<void> {
  await db.execute(
    `update api_tokens set scopes = ?::text[], level = 'personal', target_org_id = null,
       target_repo_id = null, expires_at = null where id = ?`,
    [textArray(scopes), id],
  );
}

/** One page of the user's tokens (without CI clone credentials), oldest first, and their total. */
export async function tokensPage(
  db: Db,
  userId: number,
  limit: number,
  offset: number,
): Promise<{ rows: TokenRow[]; total: number }> {
  const total = await heldTokens(db, userId);
  const rows = await db.execute<TokenRow[]>(
    `select ${TOKEN} from api_tokens where user_id = ? and pipeline_id is null order by id limit ? offset ?`,
    [userId, limit, offset],
  );
  return { rows, total };
}

/** Deletes one of the user's tokens; false when the user has no token of that id. */
export async function deleteToken(db: Db, userId: number, id: number): Promise<boolean> {
  const rows = await db.execute('delete from api_tokens where id = ? and user_id = ? returning id', [
    id,
    userId,
  ]);
  return rows.length > 0;
}

const GRANT = new Prepared<GrantRow>(
  'token_grant',
  `select t.id, t.scopes, t.level, t.target_org_id as "targetOrgId", t.target_repo_id as "targetRepoId",
          t.expires_at as "expiresAt", t.pipeline_id is not null as pipeline, t.api_variant as "apiVariant",
          u.id as "userId", u.username, u.is_admin as "isAdmin"
     from api_tokens t join users u on u.id = t.user_id
    where t.token_hash = ?`,
);

export function grantByHash(db: Db, hash: string): Promise<GrantRow | undefined> {
  return GRANT.first(db, [hash]);
}

/** Records use at most once a minute per token (the condition also covers other replicas). */
export async function touchToken(db: Db, id: number): Promise<void> {
  await db.execute(
    `update api_tokens set last_used_at = now()
      where id = ? and (last_used_at is null or last_used_at < now() - interval '1 minute')`,
    [id],
  );
}

/** Revokes the CI clone credentials of these pipelines. */
export async function deletePipelineTokens(db: Db, pipelineIds: readonly number[]): Promise<void> {
  if (pipelineIds.length === 0) return;
  await db.execute('delete from api_tokens where pipeline_id = any(?::int[])', [intArray(pipelineIds)]);
}

// ----- passwords (table `password_links` too) ------------------------------------------------------

/** A user that may sign in with a password, and its hash (null: no password set). */
export type PasswordRow = { id: number; username: string; isAdmin: boolean; passwordHash: string | null };
const PASSWORD_ROW = 'id, username, is_admin as "isAdmin", password_hash as "passwordHash"';

export function passwordById(db: Db, id: number): Promise<PasswordRow | undefined> {
  return first<PasswordRow>(db, `select ${PASSWORD_ROW} from users where id = ?`, [id]);
}

/** The user whose username is `login`, else those whose e-mail it is (case-insensitive), at most 5. */
export async function passwordsByLogin(db: Db, login: string): Promise<PasswordRow[]> {
  const byName = await db.execute<PasswordRow[]>(
    `select ${PASSWORD_ROW} from users where lower(username) = lower(?)`,
    [login],
  );
  if (byName.length > 0) return byName;
  return db.execute<PasswordRow[]>(
    `select ${PASSWORD_ROW} from users where lower(email) = lower(?) order by id limit 5`,
    [login],
  );
}

export async function setPasswordHash(db: Db, id: number, hash: string | null): Promise<boolean> {
  const rows = await db.execute('update users set password_hash = ? where id = ? returning id', [hash, id]);
  return rows.length > 0;
}

export async function insertPasswordLink(db: Db, userId: number, tokenHash: string, expiresAt: Date) {
  await db.execute('insert into password_links (user_id, token_hash, expires_at) values (?, ?, ?)', [
    userId,
    tokenHash,
    expiresAt,
  ]);
}

/** The user of an unexpired link (undefined otherwise); `consume` deletes the link in the same statement. */
export async function passwordLink(db: Db, tokenHash: string, consume: boolean): Promise<number | undefined> {
  const rows = consume
    ? await db.execute<{ userId: number }[]>(
        `delete from password_links where token_hash = ? and expires_at > now() returning user_id as "userId"`,
        [tokenHash],
      )
    : await db.execute<{ userId: number }[]>(
        `select user_id as "userId" from password_links where token_hash = ? and expires_at > now()`,
        [tokenHash],
      );
  return rows[0]?.userId;
}

/** Every link of the user goes (its password was set), and expired links of anyone. */
export async function deletePasswordLinks(db: Db, userId: number): Promise<void> {
  await db.execute('delete from password_links where user_id = ? or expires_at <= now()', [userId]);
}

/** Changes the fields given (the others stay); undefined when the user does not exist. */
export function updateUser(
  db: Db,
  id: number,
  u: { email?: string | undefined; displayName?: string | undefined; isAdmin?: boolean | undefined },
): Promise<UserRow | undefined> {
  return first<UserRow>(
    db,
    `update users set email = coalesce(?, email), display_name = coalesce(?, display_name),
       is_admin = coalesce(?, is_admin) where id = ? returning ${USER}`,
    [u.email ?? null, u.displayName ?? null, u.isAdmin ?? null, id],
  );
}

/** The site administrator made first (none: undefined). */
export function oldestAdmin(db: Db): Promise<UserRow | undefined> {
  return first<UserRow>(db, `select ${USER} from users where is_admin order by id limit 1`, []);
}

export async function otherAdmins(db: Db, id: number): Promise<number> {
  return count(db, 'select count(*) as n from users where is_admin and id <> ?', [id]);
}
