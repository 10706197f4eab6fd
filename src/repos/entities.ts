import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

export const Repo = defineEntity({
  name: 'Repo',
  tableName: 'repos',
  properties: {
    id: p.integer().primary().autoincrement(),
    orgId: p.integer(),
    name: p.string(),
    description: p.text().default(''),
    isPrivate: p.boolean().default(false),
    vcs: p.string(),
    defaultBranch: p.string(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});
export type Repo = InferEntity<typeof Repo>;
