/**
 * Who acts and what they may do, as every layer names it: scopes, token levels, organization roles,
 * the `Actor` a service receives, and token hashing. The HTTP edge (`http/auth.ts`) turns a
 * request's credentials into these; services and repositories take them as plain values.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ApiVariant } from './variant.ts';

export const CURRENT_SCOPES = [
  'repo:read',
  'repo:write',
  'issues:read',
  'issues:write',
  'pulls:read',
  'pulls:write',
  'releases:read',
  'releases:write',
  'ci:read',
  'ci:write',
  'agents:admin',
  'admin',
] as const;
export const EARLIER_SCOPES = ['read', 'write', 'admin'] as const;
export const ALL_SCOPES = [...new Set<string>([...CURRENT_SCOPES, ...EARLIER_SCOPES])];
export type Scope = (typeof CURRENT_SCOPES)[number];
export type TokenLevel = 'personal' | 'org' | 'repo';
export type Role = 'owner' | 'member';

/**
 * True when the granted scopes include `needed`, counting write => read, the coarse earlier-variant
 * scopes, and admin => all. `agents:admin` (the agent administration an operator needs) is implied
 * by `admin` alone.
 */
export function scopeAllows(granted: readonly string[], needed: Scope): boolean {
  if (granted.includes('admin') || granted.includes(needed)) return true;
  if (needed === 'admin' || needed === 'agents:admin') return false;
  const [area, action] = needed.split(':') as [string, 'read' | 'write'];
  if (action === 'read' && granted.includes(`${area}:write`)) return true;
  if (granted.includes('write')) return true;
  return action === 'read' && granted.includes('read');
}

/**
 * Tokens are stored and looked up by their SHA-256: the lookup compares hashes, never the secret,
 * so its timing says nothing about a valid token's value.
 */
export function hashToken(plaintext: string): string {
  return createHash('sha256').update(plaintext, 'utf8').digest('hex');
}

/** A new random token value (`prefix` and 48 hex digits); store only its `hashToken`. */
export function newTokenValue(prefix = 'triad_'): string {
  return `${prefix}${randomBytes(24).toString('hex')}`;
}

export type AuthUser = { id: number; username: string; isAdmin: boolean };

/** What a user token grants: its scopes and the level and target it is restricted to. */
export type TokenGrant = {
  id: number | null;
  scopes: readonly string[];
  level: TokenLevel;
  targetOrgId: number | null;
  targetRepoId: number | null;
  /** A CI pipeline's short-lived clone credential: it may read its repository and nothing else. */
  pipeline?: boolean;
  /** When the token expires (null: never); a token it mints never outlives it. */
  expiresAt?: Date | null;
  /** The API variant the token pins (its requests' default when they send no header); null: none. */
  apiVariant?: ApiVariant | null;
};

/**
 * Who acts, as a service sees it: plain facts a route takes from `Access` (services never see
 * `Access` or the request). `role` is the caller's role in the organization of the resource,
 * when the route looked it up (site admins count as owners).
 */
export type Actor = { id: number; username: string; isAdmin: boolean; role?: Role | undefined };

/**
 * What a caller reaches in the lists that span organizations (the caller's organizations and
 * repositories, repository search), as `Access.listReach` states it for a service.
 */
export type ListReach = {
  /** The calling user; undefined when anonymous. */
  userId: number | undefined;
  /** A site administrator: counts as an owner of every organization its token reaches. */
  siteAdmin: boolean;
  /** The token may read private repositories (`repo:read`). */
  privateRepos: boolean;
  /** An organization or repository token: the organization it is restricted to. */
  orgId: number | null;
  /** A repository token: the repository it is restricted to. */
  repoId: number | null;
};
