import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import { isDbId, isoTime, isUniqueViolation } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import {
  hashToken,
  newTokenValue,
  scopeAllows,
  type AuthUser,
  type Scope,
  type TokenGrant,
  type TokenLevel,
} from '../domain/access.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import * as db from './repository.ts';
import type { UserRefRow, UserRow } from './repository.ts';
import {
  tokenJson,
  type CreateTokenBody,
  type CreateUserBody,
  type TokenJson,
  type UpdateUserBody,
} from './schemas.ts';
import { PasswordsService, type OnPasswordChange } from './passwords.ts';
import { AdminBootstrap } from './bootstrap.ts';

export type { UserRefRow, UserRow };

/** A token's target: an organization, and for a repository token also the repository. */
export type TokenTarget = { orgId: number | null; repoId: number | null };

/** Token targets (`org` or `org/repo`) by name and back; supplied by the org and repo services. */
export type TargetDirectory = {
  /** Resolves a target the user may name (404 otherwise). */
  resolve: (
    level: Exclude<TokenLevel, 'personal'>,
    target: string,
    userId: number,
  ) => Promise<{ orgId: number; repoId: number | null }>;
  /** The names of targets (`org`, `org/repo`, or null for a personal token), in one go. */
  names: (targets: readonly TokenTarget[]) => Promise<(string | null)[]>;
};

/** The facts of a user minting a clone credential for a CI pipeline. */
export type CloneTokenGrant = {
  userId: number;
  pipelineId: number;
  orgId: number;
  repoId: number;
  expiresAt: Date;
};

export class UsersService {
  private readonly em: () => EntityManager;
  private readonly targets: TargetDirectory;
  private readonly maxTokens: number;
  /** Web passwords: set, changed, checked at sign-in, one-time links. */
  readonly passwords: PasswordsService;
  /** The administrator at start: `TRIAD_ADMIN_*`, or the first start's. */
  readonly bootstrap: AdminBootstrap;

  constructor(deps: {
    em: () => EntityManager;
    targets: TargetDirectory;
    /** Tokens one user may hold (CI clone credentials not counted); 409 beyond. */
    maxTokensPerUser?: number;
    /** What a password change ends besides (the user's web sessions). */
    onPasswordChange?: OnPasswordChange;
  }) {
    this.em = deps.em;
    this.targets = deps.targets;
    this.maxTokens = deps.maxTokensPerUser ?? 100;
    this.bootstrap = new AdminBootstrap(deps.em);
    this.passwords = new PasswordsService({
      em: deps.em,
      ...(deps.onPasswordChange === undefined ? {} : { onChange: deps.onPasswordChange }),
    });
  }

  async get(id: number): Promise<UserRow> {
    const u = await db.userById(this.em(), id);
    if (u === undefined) throw ApiError.notFound('user');
    return u;
  }

  async byUsername(username: string): Promise<UserRow> {
    const u = await db.userByName(this.em(), username);
    if (u === undefined) throw ApiError.notFound('user');
    return u;
  }

  async create(body: CreateUserBody): Promise<UserRow> {
    const em = this.em();
    const taken = () => ApiError.conflict(`username "${body.username}" is taken`);
    if ((await db.userByName(em, body.username)) !== undefined) throw taken();
    const passwordHash = body.password === undefined ? undefined : await this.passwords.hash(body.password);
    try {
      return await db.insertUser(em, {
        username: body.username,
        email: body.email,
        displayName: body.display_name ?? body.username,
        isAdmin: body.is_admin ?? false,
        ...(passwordHash === undefined ? {} : { passwordHash }),
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw taken();
      throw e;
    }
  }

  /**
   * Changes a user's e-mail, display name, administrator flag or password (the fields given), in
   * one transaction. A new password ends the user's web sessions. The last site administrator
   * cannot lose the flag (409).
   */
  async update(username: string, body: UpdateUserBody): Promise<UserRow> {
    const user = await this.byUsername(username);
    const hash = body.password === undefined ? undefined : await this.passwords.hash(body.password);
    return this.em().transactional(async (tx) => {
      await db.lockAdminBootstrap(tx);
      if (body.is_admin === false && user.isAdmin && (await db.otherAdmins(tx, user.id)) === 0) {
        throw ApiError.conflict('the last site administrator cannot stop being one');
      }
      const row = await db.updateUser(tx, user.id, {
        email: body.email,
        displayName: body.display_name,
        isAdmin: body.is_admin,
      });
      if (row === undefined) throw ApiError.notFound('user');
      if (hash !== undefined) await this.passwords.store(tx, user.id, hash);
      return row;
    });
  }

  /**
   * Creates a token. `minter` is the grant of the token making the request (absent for the CLI):
   * a token cannot mint a token with a scope it lacks or a wider reach than its own level and
   * target, so no token escalates its own privileges (`checkReach: false` for the admin
   * endpoint, whose caller is a site admin). Whatever the endpoint, a minted token never outlives
   * its minter: without `expires_at` it takes the minter's expiry, and a later one is 400.
   * A user holds at most `maxTokensPerUser` tokens (409 `limit_exceeded` beyond).
   */
  async createToken(
    userId: number,
    body: CreateTokenBody,
    minter?: TokenGrant,
    opts: { checkReach?: boolean } = {},
  ): Promise<TokenJson & { token: string }> {
    const now = Date.now();
    let expiresAt = body.expires_at == null ? null : new Date(body.expires_at);
    if (expiresAt !== null && expiresAt.getTime() <= now) {
      throw ApiError.validation('body.expires_at: must be in the future');
    }
    const limit = minter?.expiresAt ?? null;
    if (limit !== null) {
      if (expiresAt === null) expiresAt = limit;
      else if (expiresAt.getTime() > limit.getTime()) {
        throw ApiError.validation(
          `body.expires_at: must not be later than the expiry of the token making the request (${limit.toISOString()})`,
        );
      }
    }
    let target: TokenTarget = { orgId: null, repoId: null };
    if (body.level === 'personal') {
      if (body.target !== undefined)
        throw ApiError.validation('body.target: not allowed for a personal token');
    } else {
      if (body.target === undefined)
        throw ApiError.validation(`body.target: required for a ${body.level} token`);
      target = await this.targets.resolve(body.level, body.target, userId);
    }
    if (minter !== undefined && opts.checkReach !== false) {
      const missing = body.scopes.filter((s) => !mayGrant(minter.scopes, s));
      if (missing.length > 0) {
        throw ApiError.forbidden(`this token cannot grant scopes it does not hold: ${missing.join(', ')}`);
      }
      const within =
        minter.level === 'personal' ||
        (minter.level === 'org' && target.orgId === minter.targetOrgId) ||
        (minter.level === 'repo' && body.level === 'repo' && target.repoId === minter.targetRepoId);
      if (!within)
        throw ApiError.forbidden('this token cannot create a token reaching beyond its own target');
    }
    const plaintext = newTokenValue();
    const token = await this.em().transactional(async (tx) => {
      // The user's row lock serialises this user's creates, so concurrent ones cannot pass the cap.
      await db.lockUser(tx, userId);
      if ((await db.heldTokens(tx, userId)) >= this.maxTokens) {
        throw ApiError.limitExceeded(
          `token limit reached: a user may hold at most ${this.maxTokens} tokens (expired ones count until deleted); delete one first`,
        );
      }
      return db.insertToken(tx, {
        userId,
        name: body.name,
        hash: hashToken(plaintext),
        scopes: body.scopes,
        level: body.level,
        targetOrgId: target.orgId,
        targetRepoId: target.repoId,
        expiresAt,
        apiVariant: body.api_variant ?? null,
      });
    });
    const [name = null] = await this.targets.names([target]);
    return { ...tokenJson(token, name), token: plaintext };
  }

  /** The user's tokens, oldest first, one page (CI clone credentials are not listed). */
  async listTokens(userId: number, q: PageQuery): Promise<Page<TokenJson>> {
    const { rows, total } = await db.tokensPage(this.em(), userId, q.per_page, offsetOf(q));
    const names = await this.targets.names(
      rows.map((t) => ({ orgId: t.targetOrgId, repoId: t.targetRepoId })),
    );
    const items = rows.map((t, i) => tokenJson(t, names[i] ?? null));
    return { items, total, page: q.page, perPage: q.per_page };
  }

  async deleteToken(userId: number, id: number): Promise<void> {
    if (!isDbId(id) || !(await db.deleteToken(this.em(), userId, id))) throw ApiError.notFound('token');
  }

  async userByTokenHash(
    hash: string,
  ): Promise<{ user: AuthUser; grant: TokenGrant; expiresAt: Date | null } | undefined> {
    const r = await db.grantByHash(this.em(), hash);
    if (r === undefined) return undefined;
    const expiresAt = r.expiresAt === null ? null : new Date(isoTime(r.expiresAt));
    return {
      user: { id: r.userId, username: r.username, isAdmin: r.isAdmin },
      grant: {
        id: r.id,
        scopes: r.scopes,
        level: r.level,
        targetOrgId: r.targetOrgId,
        targetRepoId: r.targetRepoId,
        pipeline: r.pipeline,
        expiresAt,
        apiVariant: r.apiVariant,
      },
      expiresAt,
    };
  }

  /** When this process last recorded each token's use (bounded: cleared when it grows large). */
  private readonly touched = new Map<number, number>();

  /**
   * Records token use, at most once a minute per token, off the request path: this process
   * skips the write within the minute, and the SQL condition covers other replicas.
   */
  async touchToken(id: number): Promise<void> {
    const now = Date.now();
    if (now - (this.touched.get(id) ?? 0) < 60_000) return;
    if (this.touched.size > 10_000) this.touched.clear();
    this.touched.set(id, now);
    await db.touchToken(this.em(), id);
  }

  // ----- for other features ----------------------------------------------------------------------

  /** The users of `ids` that exist, by id (one query for any number of ids). */
  async refs(ids: readonly (number | null)[], tx: Db = this.em()): Promise<Map<number, UserRefRow>> {
    const wanted = [...new Set(ids.filter((i): i is number => i !== null))];
    const rows = await db.refsByIds(tx, wanted);
    return new Map(rows.map((u) => [u.id, u]));
  }

  /** Usernames of the users of `ids` that exist (one query). */
  async usernames(ids: readonly (number | null)[]): Promise<Map<number, string>> {
    return db.usernamesByIds(this.em(), [...new Set(ids.filter((i): i is number => i !== null))]);
  }

  /** Ids of the users with this display name (case-insensitive), lowest first, at most `limit`. */
  async idsByDisplayName(name: string, limit?: number): Promise<number[]> {
    return db.idsByDisplayName(this.em(), name, limit);
  }

  /** Ids of the users whose username or display name is `name` (case-insensitive), lowest first. */
  async idsByName(name: string): Promise<number[]> {
    return db.idsByName(this.em(), name);
  }

  /** The user with this username (case-insensitive), if any. */
  async findByUsername(username: string): Promise<UserRow | undefined> {
    return db.userByName(this.em(), username);
  }

  /** A page of the users of `ids`, by username (case-insensitive). */
  async page(ids: readonly number[], limit: number, offset: number): Promise<UserRow[]> {
    return ids.length === 0 ? [] : db.usersPage(this.em(), ids, limit, offset);
  }

  /** Holds the user's row lock until `tx` ends: serialises the user's capped creates. */
  async lock(tx: Db, userId: number): Promise<void> {
    await db.lockUser(tx, userId);
  }

  /**
   * Mints a pipeline's clone credential in `tx`: a repo-level `repo:read` token of the user who
   * triggered it, expiring at `expiresAt`, not listed to the user. Returns the plaintext.
   */
  async createCloneToken(tx: Db, g: CloneTokenGrant): Promise<string> {
    const token = newTokenValue();
    await db.insertToken(tx, {
      userId: g.userId,
      name: `ci clone for pipeline ${g.pipelineId}`,
      hash: hashToken(token),
      scopes: ['repo:read'],
      level: 'repo',
      targetOrgId: g.orgId,
      targetRepoId: g.repoId,
      expiresAt: g.expiresAt,
      pipelineId: g.pipelineId,
    });
    return token;
  }

  /** Revokes the clone credentials of these pipelines, in `tx`. */
  async revokeCloneTokens(tx: Db, pipelineIds: readonly number[]): Promise<void> {
    await db.deletePipelineTokens(tx, pipelineIds);
  }
}

/** May a token holding `held` grant `scope` (current or earlier-variant name)? */
function mayGrant(held: readonly string[], scope: string): boolean {
  if (held.includes('admin') || held.includes(scope)) return true;
  if (scope === 'read') return held.includes('write');
  if (scope === 'write' || scope === 'admin') return false;
  return scopeAllows(held, scope as Scope);
}
