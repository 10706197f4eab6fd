import type { Request, RequestHandler } from 'express';
import { ApiError } from './errors.ts';
import type { AuthThrottle } from './throttle.ts';
import {
  hashToken,
  scopeAllows,
  type Actor,
  type AuthUser,
  type ListReach,
  type Role,
  type Scope,
  type TokenGrant,
} from '../domain/access.ts';
import type { OrgRef, PrivateShown, RepoRef, RepoTarget } from '../domain/repo.ts';
import { earlierScopeHeld, type ApiVariant, type EarlierScope } from '../domain/variant.ts';
import { variantFor } from './variant.ts';

export type Principal =
  | { kind: 'anonymous' }
  | { kind: 'user'; user: AuthUser; grant: TokenGrant }
  | { kind: 'agent'; agentId: number; name: string; instance: string | undefined };

/** What authorization needs to know about the world; implemented by the feature services. */
export interface Directory {
  userByTokenHash(
    hash: string,
  ): Promise<{ user: AuthUser; grant: TokenGrant; expiresAt: Date | null } | undefined>;
  agentByTokenHash(hash: string): Promise<{ id: number; name: string } | undefined>;
  orgByName(name: string): Promise<OrgRef | undefined>;
  /** The repository and its organization by their names, in one lookup (undefined if either is missing). */
  repoByNames(orgName: string, repoName: string): Promise<RepoTarget | undefined>;
  role(orgId: number, userId: number): Promise<Role | undefined>;
}

/**
 * `earlier`: where the spec's earlier variant states another scope for the endpoint than the
 * current one translated (webhooks: `write`), the scope a request in the earlier variant needs
 * instead of `scope`.
 */
export type OrgNeeds = { scope?: Scope; role?: Role; earlier?: EarlierScope };
/** `authenticated`: a token is required even on a public repository (e.g. the step log read). */
export type RepoNeeds = { scope?: Scope; role?: Role; authenticated?: boolean; earlier?: EarlierScope };

/**
 * The one authorization helper. Each route states what it needs in one call:
 *   access.user()                                  any valid token
 *   access.admin()                                 site admin with the admin scope
 *   access.org(name, {role: 'member'})             org member (404 unknown org)
 *   access.repo(org, repo, {scope: 'repo:write', role: 'owner'})
 * Rules: 401 when a token is needed and missing; 403 when scope, level target or role is
 * insufficient; 404 for a private repository the caller may not see.
 */
export class Access {
  readonly principal: Principal;
  /** The API variant the request is answered in (src/http/variant.ts); the web: always current. */
  readonly variant: ApiVariant;
  private readonly dir: Directory;
  private readonly roleCache = new Map<number, Role | undefined>();

  constructor(principal: Principal, dir: Directory, variant: ApiVariant = 'current') {
    this.principal = principal;
    this.dir = dir;
    this.variant = variant;
  }

  get userId(): number | undefined {
    return this.principal.kind === 'user' ? this.principal.user.id : undefined;
  }

  /**
   * Any valid user token; optionally a scope, or in the earlier variant the earlier scope
   * `earlier` where the endpoint states one (a token's scope names of either variant count, the
   * earlier ones translated: `earlierScopeHeld`, `scopeAllows`).
   */
  user(scope?: Scope, earlier?: EarlierScope): AuthUser {
    const p = this.principal;
    if (p.kind !== 'user') throw ApiError.unauthorized();
    if (this.variant === 'earlier' && earlier !== undefined) {
      if (!earlierScopeHeld(p.grant.scopes, earlier)) {
        throw ApiError.forbidden(`token lacks the ${earlier} scope (earlier API variant)`);
      }
      return p.user;
    }
    if (scope !== undefined && !scopeAllows(p.grant.scopes, scope)) {
      throw ApiError.forbidden(`token lacks the ${scope} scope`);
    }
    return p.user;
  }

  /** The calling user as an `Actor` (401 without a user token, 403 without `scope`). */
  actor(scope?: Scope): Actor {
    const u = this.user(scope);
    return { id: u.id, username: u.username, isAdmin: u.isAdmin };
  }

  /** The calling user as an `Actor` with its role in the organization. */
  async actorIn(orgId: number, scope?: Scope): Promise<Actor> {
    return { ...this.actor(scope), role: await this.roleIn(orgId) };
  }

  /** Any valid user token of the personal level (account-wide actions); optionally a scope. */
  personal(scope?: Scope): AuthUser {
    const u = this.user(scope);
    const p = this.principal as Extract<Principal, { kind: 'user' }>;
    if (p.grant.level !== 'personal') throw ApiError.forbidden('this action needs a personal token');
    return u;
  }

  /** Site administrator holding the admin scope on a personal token. */
  admin(): AuthUser {
    const u = this.user('admin');
    const p = this.principal as Extract<Principal, { kind: 'user' }>;
    if (!u.isAdmin) throw ApiError.forbidden('site administrator required');
    if (p.grant.level !== 'personal') throw ApiError.forbidden('administration needs a personal token');
    return u;
  }

  /**
   * The agent administration (register, list, deregister agents; the queue figures): a site
   * administrator's personal token with `agents:admin` (or `admin`, which implies it).
   */
  agentsAdmin(): AuthUser {
    const u = this.user('agents:admin');
    const p = this.principal as Extract<Principal, { kind: 'user' }>;
    if (!u.isAdmin) throw ApiError.forbidden('site administrator required');
    if (p.grant.level !== 'personal') throw ApiError.forbidden('administration needs a personal token');
    return u;
  }

  agent(): Extract<Principal, { kind: 'agent' }> {
    if (this.principal.kind !== 'agent') throw ApiError.unauthorized('agent token required');
    return this.principal;
  }

  /** The caller's role in the org (site admins count as owners), or undefined. */
  async roleIn(orgId: number): Promise<Role | undefined> {
    const p = this.principal;
    if (p.kind !== 'user') return undefined;
    if (p.user.isAdmin) return 'owner';
    if (!this.roleCache.has(orgId)) this.roleCache.set(orgId, await this.dir.role(orgId, p.user.id));
    return this.roleCache.get(orgId);
  }

  /** Does the token's level reach this org (org-wide actions) or repository? */
  private reaches(orgId: number, repoId?: number): boolean {
    const p = this.principal;
    if (p.kind !== 'user') return false;
    switch (p.grant.level) {
      case 'personal':
        return true;
      case 'org':
        return p.grant.targetOrgId === orgId;
      case 'repo':
        return repoId !== undefined && p.grant.targetRepoId === repoId;
    }
  }

  async org(name: string, needs: OrgNeeds = {}): Promise<OrgRef> {
    const org = await this.dir.orgByName(name);
    if (org === undefined) throw ApiError.notFound('organization');
    if (needs.scope === undefined && needs.role === undefined && needs.earlier === undefined) return org;
    this.user(needs.scope, needs.earlier);
    if (!this.reaches(org.id)) throw ApiError.forbidden('token is restricted to another target');
    if (needs.role !== undefined) await this.requireRole(org.id, needs.role);
    return org;
  }

  async repo(
    orgName: string,
    repoName: string,
    needs: RepoNeeds = {},
  ): Promise<{ org: OrgRef; repo: RepoRef }> {
    // Looked up afresh on every request (never cached): a repository made private is private at once.
    const found = await this.dir.repoByNames(orgName, repoName);
    if (found === undefined) throw ApiError.notFound('repository');
    return this.authorize(found, needs);
  }

  /** `repo` for a repository the caller already looked up (this request, by its names). */
  async authorize(found: RepoTarget, needs: RepoNeeds = {}): Promise<RepoTarget> {
    if (!(await this.canSee(found.repo))) throw ApiError.notFound('repository');
    const { org, repo } = found;
    const readOnly =
      needs.role === undefined &&
      needs.authenticated !== true &&
      needs.earlier === undefined &&
      (needs.scope === undefined || needs.scope.endsWith(':read'));
    if (readOnly && !repo.isPrivate) return { org, repo };
    this.user(needs.scope, needs.earlier);
    if (!this.reaches(org.id, repo.id)) throw ApiError.forbidden('token is restricted to another target');
    if (needs.role !== undefined) await this.requireRole(org.id, needs.role);
    return { org, repo };
  }

  /**
   * The private repositories of an org the caller may list (those `repo(..., {scope:
   * 'repo:read'})` answers): for a member whose token has repo:read, all the token reaches.
   */
  async privateReposShown(orgId: number): Promise<PrivateShown> {
    const p = this.principal;
    if (p.kind !== 'user' || !scopeAllows(p.grant.scopes, 'repo:read')) return 'none';
    if ((await this.roleIn(orgId)) === undefined) return 'none';
    if (p.grant.level === 'personal' || (p.grant.level === 'org' && p.grant.targetOrgId === orgId))
      return 'all';
    if (p.grant.level === 'repo' && p.grant.targetRepoId !== null) return { repoId: p.grant.targetRepoId };
    return 'none';
  }

  /** What the caller reaches in lists spanning organizations (see `ListReach`). */
  listReach(): ListReach {
    const p = this.principal;
    if (p.kind !== 'user') {
      return { userId: undefined, siteAdmin: false, privateRepos: false, orgId: null, repoId: null };
    }
    const g = p.grant;
    return {
      userId: p.user.id,
      siteAdmin: p.user.isAdmin,
      privateRepos: scopeAllows(g.scopes, 'repo:read'),
      // (0 names nothing: a restricted token whose target is unknown reaches nothing)
      orgId: g.level === 'personal' ? null : (g.targetOrgId ?? 0),
      repoId: g.level === 'repo' ? (g.targetRepoId ?? 0) : null,
    };
  }

  /** Public repositories are visible to all; private ones to members whose token reaches them. */
  async canSee(repo: RepoRef): Promise<boolean> {
    if (!repo.isPrivate) return true;
    if (this.principal.kind !== 'user' || !this.reaches(repo.orgId, repo.id)) return false;
    return (await this.roleIn(repo.orgId)) !== undefined;
  }

  private async requireRole(orgId: number, role: Role): Promise<void> {
    const have = await this.roleIn(orgId);
    if (have === undefined) throw ApiError.forbidden('organization membership required');
    if (role === 'owner' && have !== 'owner') throw ApiError.forbidden('organization owner required');
  }
}

const AGENT_PREFIX = '/api/v1/ci/';
/** Under /api/v1/ci/ only these also take a user token (an admin reading the queue). */
const USER_OK_UNDER_CI = new Set(['/api/v1/ci/queue']);

/**
 * Resolves `Authorization: Bearer <token>` into a principal. User tokens are refused under
 * `/api/v1/ci/` and agent tokens everywhere else (both 401). A malformed, unknown or expired
 * token is a 401 even on public routes, so a client never silently acts anonymously. With a
 * `throttle`, those 401s count against the client address and the presented token (agent tokens
 * under `/api/v1/ci/` apart from users' tokens), and guessing gets 429 (see `AuthThrottle`).
 */
export function authenticate(
  dir: Directory,
  onUse: (tokenId: number) => void,
  throttle?: AuthThrottle,
): RequestHandler {
  return async (req, res, next) => {
    const header = req.headers.authorization;
    // Clone URLs (outside /api/) authenticate with HTTP Basic in the hosting handler.
    const lower = req.path.toLowerCase(); // express routing ignores case; so must this check
    const resolve = () => bearerPrincipal(req, header ?? '', lower, dir, onUse);
    const principal: Principal =
      header === undefined || !lower.startsWith('/api/')
        ? { kind: 'anonymous' }
        : throttle === undefined
          ? await resolve()
          : await throttle.guard(
              req,
              resolve,
              (e) => e instanceof ApiError && e.status === 401,
              lower.startsWith(AGENT_PREFIX) && !USER_OK_UNDER_CI.has(lower) ? 'agent' : 'user',
            );
    res.locals.access = new Access(principal, dir, variantFor(res, principal));
    next();
  };
}

/** The principal of an API request's `Authorization` header (401 when it names nobody). */
async function bearerPrincipal(
  req: Request,
  header: string,
  lower: string,
  dir: Directory,
  onUse: (tokenId: number) => void,
): Promise<Principal> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (m?.[1] === undefined) throw ApiError.unauthorized('Authorization must be "Bearer <token>"');
  const hash = hashToken(m[1]);
  const agent = lower.startsWith(AGENT_PREFIX) ? await dir.agentByTokenHash(hash) : undefined;
  if (agent === undefined && lower.startsWith(AGENT_PREFIX) && !USER_OK_UNDER_CI.has(lower)) {
    throw ApiError.unauthorized('invalid agent token');
  }
  if (agent !== undefined) {
    const instance = req.headers['x-svc-agent-instance'];
    return {
      kind: 'agent',
      agentId: agent.id,
      name: agent.name,
      instance: typeof instance === 'string' && instance !== '' ? instance.slice(0, 255) : undefined,
    };
  }
  const found = await dir.userByTokenHash(hash);
  if (found === undefined) throw ApiError.unauthorized('invalid token');
  if (found.expiresAt !== null && found.expiresAt.getTime() <= Date.now()) {
    throw ApiError.unauthorized('token expired');
  }
  if (found.grant.id !== null) onUse(found.grant.id);
  return { kind: 'user', user: found.user, grant: found.grant };
}
