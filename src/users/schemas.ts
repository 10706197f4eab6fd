import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { ALL_SCOPES } from '../domain/access.ts';
import { API_VARIANTS, EARLIER_SCOPE_NAMES } from '../domain/variant.ts';
import { handleSchema, nonBlank, timestampInput } from '../http/input.ts';
import { timestamp } from '../http/responses.ts';
import type { TokenRow, UserRefRow, UserRow } from './repository.ts';

// ----- requests ----------------------------------------------------------------------------------

const apiVariantField = z.enum(API_VARIANTS);

export const usernameSchema = handleSchema;

/** A password (web sign-in): 8 to 1024 characters, anything else allowed. */
export const passwordSchema = z
  .string()
  .min(8, 'must be at least 8 characters long')
  .max(1024, 'must be at most 1024 characters long')
  .meta({ format: 'password', writeOnly: true });

export const createUserBody = z.object({
  username: usernameSchema,
  email: z.email().max(255),
  display_name: z.string().max(255).trim().min(1).meta(nonBlank).optional(),
  is_admin: z.boolean().optional(),
  password: passwordSchema.optional().meta({ description: 'signs in to the web interface; never returned' }),
});
export type CreateUserBody = z.infer<typeof createUserBody>;

export const updateUserBody = z.object({
  email: z.email().max(255).optional(),
  display_name: z.string().max(255).trim().min(1).meta(nonBlank).optional(),
  is_admin: z.boolean().optional(),
  password: passwordSchema
    .optional()
    .meta({ description: "sets the user's web password and ends the user's web sessions; never returned" }),
});
export type UpdateUserBody = z.infer<typeof updateUserBody>;

export const createTokenBody = z.object({
  name: z.string().max(255).trim().min(1).meta(nonBlank),
  scopes: z
    .array(z.enum(ALL_SCOPES as [string, ...string[]]))
    .min(1)
    .refine((s) => new Set(s).size === s.length, 'scopes must not repeat'),
  expires_at: timestampInput.nullish(),
  level: z.enum(['personal', 'org', 'repo']).default('personal'),
  target: z.string().min(1).max(200).optional(),
  api_variant: apiVariantField.nullish().meta({
    description: "pins the API variant of the token's requests; null or absent: the server's default",
  }),
});
export type CreateTokenBody = z.infer<typeof createTokenBody>;

/** The earlier variant's token create: the same body with the earlier scope names only. */
export const earlierCreateTokenBody = createTokenBody.extend({
  scopes: z
    .array(z.enum(EARLIER_SCOPE_NAMES))
    .min(1)
    .refine((s) => new Set(s).size === s.length, 'scopes must not repeat'),
});

// ----- responses ---------------------------------------------------------------------------------

/** Response shapes of users and tokens, and the mappers from rows to them. */
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

/** A user's public profile: no e-mail address, no administrator flag. */
export const profileSchema = z
  .object({
    id: z.int(),
    username: z.string(),
    display_name: z.string(),
    avatar_url: z.string().meta({ description: 'empty: Triad keeps no avatar images' }),
    created_at: timestamp,
  })
  .meta({ id: 'UserProfile' });
export type ProfileJson = z.infer<typeof profileSchema>;

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
    api_variant: z
      .enum(API_VARIANTS)
      .nullable()
      .meta({ description: "the API variant the token pins; null: the server's default" }),
  })
  .meta({ id: 'Token' });
export type TokenJson = z.infer<typeof tokenSchema>;

export const newTokenSchema = z
  .object({ ...tokenSchema.shape, token: z.string().meta({ description: 'the plaintext, shown only here' }) })
  .meta({ id: 'NewToken' });

export function userJson(u: UserRow): UserJson {
  return {
    id: u.id,
    username: u.username,
    email: u.email,
    display_name: u.displayName,
    is_admin: u.isAdmin,
    avatar_url: u.avatarUrl,
    created_at: isoTime(u.createdAt),
  };
}

export function profileJson(u: UserRow): ProfileJson {
  return {
    id: u.id,
    username: u.username,
    display_name: u.displayName,
    avatar_url: u.avatarUrl,
    created_at: isoTime(u.createdAt),
  };
}

/** The short form used inside other objects (authors, assignees, members). */
export function userRefJson(u: UserRefRow): UserRefJson {
  return { id: u.id, username: u.username, display_name: u.displayName, avatar_url: u.avatarUrl };
}

const isoOrNull = (v: Date | string | null): string | null => (v === null ? null : isoTime(v));

export function tokenJson(t: TokenRow, target: string | null): TokenJson {
  return {
    id: t.id,
    name: t.name,
    scopes: t.scopes,
    level: t.level,
    target,
    expires_at: isoOrNull(t.expiresAt),
    created_at: isoTime(t.createdAt),
    last_used_at: isoOrNull(t.lastUsedAt),
    api_variant: t.apiVariant,
  };
}
