import { z } from 'zod';
import { ALL_SCOPES } from '../http/auth.ts';
import { timestamp } from '../http/responses.ts';

/** Response shapes of users and tokens; the JSON mappers in service.ts return these types. */
export const userSchema = z
  .object({
    id: z.int(),
    username: z.string(),
    email: z.string(),
    display_name: z.string(),
    is_admin: z.boolean(),
    avatar_url: z.string().meta({ description: 'may be empty' }),
    created_at: timestamp,
  })
  .meta({ id: 'User' });
export type UserJson = z.infer<typeof userSchema>;

/** The short form inside other objects (authors, assignees). */
export const userRefSchema = z
  .object({ id: z.int(), username: z.string(), display_name: z.string(), avatar_url: z.string() })
  .meta({ id: 'UserRef' });
export type UserRefJson = z.infer<typeof userRefSchema>;

export const TOKEN_LEVELS = ['personal', 'org', 'repo'] as const;

export const tokenSchema = z
  .object({
    id: z.int().meta({ description: 'used in DELETE /api/v1/user/tokens/{id}' }),
    name: z.string(),
    scopes: z.array(z.enum(ALL_SCOPES as [string, ...string[]])),
    level: z.enum(TOKEN_LEVELS),
    target: z.string().nullable().meta({ description: '"org" or "org/repo" for org and repo tokens' }),
    expires_at: timestamp.nullable(),
    created_at: timestamp,
    last_used_at: timestamp.nullable(),
  })
  .meta({ id: 'Token' });
export type TokenJson = z.infer<typeof tokenSchema>;

export const newTokenSchema = z
  .object({ ...tokenSchema.shape, token: z.string().meta({ description: 'the plaintext, shown only here' }) })
  .meta({ id: 'NewToken' });
