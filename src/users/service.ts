import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { ApiError } from '../http/errors.ts';
import { nonBlank, timestampInput } from '../http/input.ts';
import {
  ALL_SCOPES,
  hashToken,
  scopeAllows,
  type AuthUser,
  type Scope,
  type TokenGrant,
  type TokenLevel,
} from '../http/auth.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { ApiToken, User } from './entities.ts';
import type { TokenJson, UserJson, UserRefJson } from './schemas.ts';

export const usernameSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(
    /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/,
    'letters, digits, ".", "_" and "-", not at either end',
  );

export const createUserBody = z.object({
  username: usernameSchema,
  email: z.email().max(255),
  display_name: z.string().trim().min(1).max(255).meta(nonBlank).optional(),
  is_admin: z.boolean().optional(),
});
export type CreateUserBody = z.infer<typeof createUserBody>;

export const createTokenBody = z.object({
  name: z.string().trim().min(1).max(255).meta(nonBlank),
  scopes: z
    .array(z.enum(ALL_SCOPES as [string, ...string[]]))
    .min(1)
    .refine((s) => new Set(s).size === s.length, 'scopes must not repeat'),
  expires_at: timestampInput.nullish(),
  level: z.enum(['personal', 'org', 'repo']).default('personal'),
  target: z.string().min(1).max(200).optional(),
});
export type CreateTokenBody = z.infer<typeof createTokenBody>;

export function userJson(u: User): UserJson {
  return {
    id: u.id,
    username: u.username,
    email: u.email,
    display_name: u.displayName,
    is_admin: u.isAdmin,
    avatar_url: u.avatarUrl,
    created_at: u.createdAt.toISOString(),
  };
}

/** The short form used inside other objects (authors, assignees, members). */
export function userRefJson(u: Pick<User, 'id' | 'username' | 'displayName' | 'avatarUrl'>): UserRefJson {
  return { id: u.id, username: u.username, display_name: u.displayName, avatar_url: u.avatarUrl };
}

function tokenJson(t: ApiToken, target: string | null): TokenJson {
  return {
    id: t.id,
    name: t.name,
    scopes: t.scopes,
    level: t.level as TokenLevel,
    target,
    expires_at: t.expiresAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    last_used_at: t.lastUsedAt?.toISOString() ?? null,
  };
}

export function newTokenValue(): string {
  return `triad_${randomBytes(24).toString('hex')}`;
}

/** Resolves a token target (`org` or `org/repo`) to ids; supplied by the org and repo services. */
export type TargetResolver = (
  level: Exclude<TokenLevel, 'personal'>,
  target: string,
  userId: number,
) => Promise<{ orgId: number; repoId: number | null }>;

export class UsersService {
  private readonly em: () => EntityManager;
  private readonly resolveTarget: TargetResolver;
  private readonly targetName: (orgId: number | null, repoId: number | null) => Promise<string | null>;

  private readonly maxTokens: number;

  constructor(deps: {
    em: () => EntityManager;
    resolveTarget: TargetResolver;
    targetName: (orgId: number | null, repoId: number | null) => Promise<string | null>;
    /** Tokens one user may hold (CI clone credentials not counted); 409 beyond. */
    maxTokensPerUser?: number;
  }) {
    this.em = deps.em;
    this.resolveTarget = deps.resolveTarget;
    this.targetName = deps.targetName;
    this.maxTokens = deps.maxTokensPerUser ?? 100;
  }

  async get(id: number): Promise<User> {
    const u = await this.em().findOne(User, { id });
    if (u === null) throw ApiError.notFound('user');
    return u;
  }

  async byUsername(username: string): Promise<User> {
    const rows = await this.em().execute<{ id: number }[]>(
      'select id from users where lower(username) = lower(?)',
      [username],
    );
    if (rows[0] === undefined) throw ApiError.notFound('user');
    return this.get(rows[0].id);
  }

  async create(body: CreateUserBody): Promise<User> {
    const em = this.em();
    const taken = await em.execute('select 1 from users where lower(username) = lower(?)', [body.username]);
    if (taken.length > 0) throw ApiError.conflict(`username "${body.username}" is taken`);
    const user = em.create(User, {
      username: body.username,
      email: body.email,
      displayName: body.display_name ?? body.username,
      isAdmin: body.is_admin ?? false,
      avatarUrl: '',
    });
    try {
      await em.flush();
    } catch (e) {
      if (isUniqueViolation(e)) throw ApiError.conflict(`username "${body.username}" is taken`);
      throw e;
    }
    return user;
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
  ) {
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
    let target: { orgId: number | null; repoId: number | null } = { orgId: null, repoId: null };
    if (body.level === 'personal') {
      if (body.target !== undefined)
        throw ApiError.validation('body.target: not allowed for a personal token');
    } else {
      if (body.target === undefined)
        throw ApiError.validation(`body.target: required for a ${body.level} token`);
      target = await this.resolveTarget(body.level, body.target, userId);
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
      // The user's row lock (which foreign-key checks do not wait for) serialises this user's
      // creates, so concurrent ones cannot pass the cap.
      await tx.execute('select id from users where id = ? for no key update', [userId]);
      const [held] = await tx.execute<{ n: string }[]>(
        'select count(*) as n from api_tokens where user_id = ? and pipeline_id is null',
        [userId],
      );
      if (Number(held?.n ?? 0) >= this.maxTokens) {
        throw ApiError.limitExceeded(
          `token limit reached: a user may hold at most ${this.maxTokens} tokens (expired ones count until deleted); delete one first`,
        );
      }
      const t = tx.create(ApiToken, {
        userId,
        name: body.name,
        tokenHash: hashToken(plaintext),
        scopes: body.scopes,
        level: body.level,
        targetOrgId: target.orgId,
        targetRepoId: target.repoId,
        expiresAt,
        lastUsedAt: null,
      });
      await tx.flush();
      return t;
    });
    return {
      ...tokenJson(token, await this.targetName(token.targetOrgId ?? null, token.targetRepoId ?? null)),
      token: plaintext,
    };
  }

  /** The user's tokens, oldest first, one page (CI clone credentials are not listed). */
  async listTokens(userId: number, q: PageQuery): Promise<Page<TokenJson>> {
    const [tokens, total] = await this.em().findAndCount(
      ApiToken,
      { userId, pipelineId: null },
      { orderBy: { id: 'asc' }, limit: q.per_page, offset: offsetOf(q) },
    );
    const items = await Promise.all(
      tokens.map(async (t) =>
        tokenJson(t, await this.targetName(t.targetOrgId ?? null, t.targetRepoId ?? null)),
      ),
    );
    return { items, total, page: q.page, perPage: q.per_page };
  }

  async deleteToken(userId: number, id: number): Promise<void> {
    const n = await this.em().nativeDelete(ApiToken, { id, userId });
    if (n === 0) throw ApiError.notFound('token');
  }

  /**
   * Bootstrap: the admin user exists (created or promoted) and, when a token is given, that
   * plaintext is a valid personal token of it with every scope.
   */
  async ensureAdmin(admin: { username: string; email: string; token: string | undefined }): Promise<User> {
    const em = this.em();
    return em.transactional(async (tx) => {
      await tx.execute('select pg_advisory_xact_lock(?)', [0x61646d6e]);
      const rows = await tx.execute<{ id: number }[]>(
        'select id from users where lower(username) = lower(?)',
        [admin.username],
      );
      let user = rows[0] === undefined ? null : await tx.findOne(User, { id: rows[0].id });
      if (user === null) {
        user = tx.create(User, {
          username: admin.username,
          email: admin.email,
          displayName: admin.username,
          isAdmin: true,
          avatarUrl: '',
        });
      } else {
        user.isAdmin = true;
      }
      await tx.flush();
      if (admin.token !== undefined) {
        const hash = hashToken(admin.token);
        const existing = await tx.findOne(ApiToken, { tokenHash: hash });
        if (existing !== null && existing.userId !== user.id) {
          throw new Error('TRIAD_ADMIN_TOKEN is already a token of another user');
        }
        const t =
          existing ??
          tx.create(ApiToken, {
            userId: user.id,
            name: 'bootstrap (TRIAD_ADMIN_TOKEN)',
            tokenHash: hash,
            scopes: ALL_SCOPES,
            level: 'personal',
            targetOrgId: null,
            targetRepoId: null,
            expiresAt: null,
            lastUsedAt: null,
          });
        t.scopes = ALL_SCOPES;
        t.level = 'personal';
        t.targetOrgId = null;
        t.targetRepoId = null;
        t.expiresAt = null;
        await tx.flush();
      }
      return user;
    });
  }

  /**
   * First start without any user: creates the administrator `username` and a personal token
   * with every scope, returning its plaintext (shown once). Undefined when a user exists already.
   */
  async createFirstAdmin(
    username: string,
    email: string,
  ): Promise<{ user: User; token: string } | undefined> {
    return this.em().transactional(async (tx) => {
      await tx.execute('select pg_advisory_xact_lock(?)', [0x61646d6e]);
      if ((await tx.execute('select 1 from users limit 1')).length > 0) return undefined;
      const user = tx.create(User, { username, email, displayName: username, isAdmin: true, avatarUrl: '' });
      await tx.flush();
      const token = newTokenValue();
      tx.create(ApiToken, {
        userId: user.id,
        name: 'first start',
        tokenHash: hashToken(token),
        scopes: ALL_SCOPES,
        level: 'personal',
        targetOrgId: null,
        targetRepoId: null,
        expiresAt: null,
        lastUsedAt: null,
      });
      await tx.flush();
      return { user, token };
    });
  }

  async userByTokenHash(
    hash: string,
  ): Promise<{ user: AuthUser; grant: TokenGrant; expiresAt: Date | null } | undefined> {
    const rows = await this.em().execute<
      {
        id: number;
        scopes: string[];
        level: TokenLevel;
        target_org_id: number | null;
        target_repo_id: number | null;
        expires_at: Date | null;
        user_id: number;
        username: string;
        is_admin: boolean;
        pipeline: boolean;
      }[]
    >(
      `select t.id, t.scopes, t.level, t.target_org_id, t.target_repo_id, t.expires_at,
              t.pipeline_id is not null as pipeline,
              u.id as user_id, u.username, u.is_admin
         from api_tokens t join users u on u.id = t.user_id
        where t.token_hash = ?`,
      [hash],
    );
    const r = rows[0];
    if (r === undefined) return undefined;
    return {
      user: { id: r.user_id, username: r.username, isAdmin: r.is_admin },
      grant: {
        id: r.id,
        scopes: r.scopes,
        level: r.level,
        targetOrgId: r.target_org_id,
        targetRepoId: r.target_repo_id,
        pipeline: r.pipeline,
        expiresAt: r.expires_at === null ? null : new Date(r.expires_at),
      },
      expiresAt: r.expires_at === null ? null : new Date(r.expires_at),
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
    await this.em().execute(
      `update api_tokens set last_used_at = now()
        where id = ? and (last_used_at is null or last_used_at < now() - interval '1 minute')`,
      [id],
    );
  }
}

/** May a token holding `held` grant `scope` (current or earlier-variant name)? */
function mayGrant(held: readonly string[], scope: string): boolean {
  if (held.includes('admin') || held.includes(scope)) return true;
  if (scope === 'read') return held.includes('write');
  if (scope === 'write' || scope === 'admin') return false;
  return scopeAllows(held, scope as Scope);
}

export function isUniqueViolation(e: unknown): boolean {
  return typeof e === 'object' && e !== null && 'code' in e && e.code === '23505';
}
