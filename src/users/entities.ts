import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.integer().primary().autoincrement(),
    username: p.string(),
    email: p.string(),
    displayName: p.string(),
    isAdmin: p.boolean().default(false),
    avatarUrl: p.string().default(''),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type User = InferEntity<typeof User>;

export const ApiToken = defineEntity({
  name: 'ApiToken',
  tableName: 'api_tokens',
  properties: {
    id: p.integer().primary().autoincrement(),
    userId: p.integer(),
    name: p.string(),
    tokenHash: p.string(),
    scopes: p.array(),
    level: p.string(),
    targetOrgId: p.integer().nullable(),
    targetRepoId: p.integer().nullable(),
    expiresAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    lastUsedAt: p.datetime().nullable(),
    /** Set for the short-lived clone credentials of CI pipelines (not listed to the user). */
    pipelineId: p.integer().nullable(),
  },
});
export type ApiToken = InferEntity<typeof ApiToken>;
