import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { handleSchema } from '../http/input.ts';
import { timestamp } from '../http/responses.ts';
import { userRefSchema } from '../users/schemas.ts';
import type { OrgRow } from './repository.ts';

// ----- requests ----------------------------------------------------------------------------------

/** Names that would shadow server routes at the root (clone URLs live at /:org/:repo). */
/**
 * Names an organization cannot take: the first path segments of the API and the probes (clone URLs
 * share the root with them), and `-` with the names of the web's global pages (under `/-/`).
 */
export const RESERVED_ORG_NAMES = new Set([
  'api',
  'healthz',
  'readyz',
  'metrics',
  '-',
  'admin',
  'assets',
  'explore',
  'login',
  'logout',
  'new',
  'password',
  'settings',
  'users',
]);

export const orgNameSchema = handleSchema.refine(
  (n) => !RESERVED_ORG_NAMES.has(n.toLowerCase()),
  'this name is reserved',
);

export const createOrgBody = z.object({
  name: orgNameSchema,
  description: z.string().max(10_000).optional(),
});
export type CreateOrgBody = z.infer<typeof createOrgBody>;
export const memberBody = z.object({ role: z.enum(['owner', 'member']) });

// ----- responses ---------------------------------------------------------------------------------

/** Response shapes of organizations, and the mapper from rows. */
export const orgSchema = z
  .object({ id: z.int(), name: z.string(), description: z.string(), created_at: timestamp })
  .meta({ id: 'Organization' });
export type OrgJson = z.infer<typeof orgSchema>;

export const ROLES = ['owner', 'member'] as const;
const roleEnum = z.enum(ROLES).meta({ id: 'Role' });

export const memberSchema = z
  .object({
    user: z.object({ ...userRefSchema.shape, email: z.string() }).meta({ id: 'MemberUser' }),
    role: roleEnum,
  })
  .meta({ id: 'Member' });
export type MemberJson = z.infer<typeof memberSchema>;

/** An organization of the caller, with the caller's role in it. */
export const userOrgSchema = z
  .object({ ...orgSchema.shape, role: roleEnum })
  .meta({ id: 'UserOrganization' });
export type UserOrgJson = z.infer<typeof userOrgSchema>;

export function orgJson(o: OrgRow): OrgJson {
  return { id: o.id, name: o.name, description: o.description, created_at: isoTime(o.createdAt) };
}
