import { z } from 'zod';
import { timestamp } from '../http/responses.ts';
import { userRefSchema } from '../users/schemas.ts';

/** Response shapes of organizations; the JSON mappers in service.ts return these types. */
export const orgSchema = z
  .object({ id: z.int(), name: z.string(), description: z.string(), created_at: timestamp })
  .meta({ id: 'Organization' });
export type OrgJson = z.infer<typeof orgSchema>;

export const ROLES = ['owner', 'member'] as const;

export const memberSchema = z
  .object({
    user: z.object({ ...userRefSchema.shape, email: z.string() }).meta({ id: 'MemberUser' }),
    role: z.enum(ROLES).meta({ id: 'Role' }),
  })
  .meta({ id: 'Member' });
export type MemberJson = z.infer<typeof memberSchema>;
