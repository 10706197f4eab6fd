/**
 * The two forms of the v1 API (spec "Versioning"): the current variant and the earlier one, which
 * older clients were written against. One internal model serves both; the variant only decides
 * what a request may say and how an answer is shaped at the HTTP edge (src/http/variant.ts), and
 * which event names a webhook receives. Who may do what is the current variant's rule in both,
 * the earlier scope names translated first (`earlierScopeHeld`).
 */
import { CURRENT_SCOPES, scopeAllows, type Scope } from './access.ts';

export const API_VARIANTS = ['current', 'earlier'] as const;
export type ApiVariant = (typeof API_VARIANTS)[number];
/** The scope names of the earlier variant. */
export const EARLIER_SCOPE_NAMES = ['read', 'write', 'admin'] as const;
export type EarlierScope = (typeof EARLIER_SCOPE_NAMES)[number];

export function isApiVariant(v: unknown): v is ApiVariant {
  return typeof v === 'string' && (API_VARIANTS as readonly string[]).includes(v);
}

/** The current scopes an earlier scope name stands for: `read` every `*:read`, `write` every `*:write` (and so `*:read`). */
export function earlierScopeMeaning(scope: EarlierScope): Scope[] {
  if (scope === 'admin') return ['admin'];
  return CURRENT_SCOPES.filter((s) => s.endsWith(scope === 'read' ? ':read' : ':write'));
}

/**
 * Does a token holding `granted` (names of either variant) hold the earlier scope `scope`? It
 * does when it holds everything the name stands for (`earlierScopeMeaning`).
 */
export function earlierScopeHeld(granted: readonly string[], scope: EarlierScope): boolean {
  return earlierScopeMeaning(scope).every((s) => scopeAllows(granted, s));
}
