import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

export const Org = defineEntity({
  name: 'Org',
  tableName: 'orgs',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string(),
    description: p.text().default(''),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Org = InferEntity<typeof Org>;

export const OrgMember = defineEntity({
  name: 'OrgMember',
  tableName: 'org_members',
  properties: {
    orgId: p.integer().primary(),
    userId: p.integer().primary(),
    role: p.string(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type OrgMember = InferEntity<typeof OrgMember>;
