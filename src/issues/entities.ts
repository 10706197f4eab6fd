import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/** An issue of a repository; `number` is allocated per repository from `repo_counters`. */
export const Issue = defineEntity({
  name: 'Issue',
  tableName: 'issues',
  properties: {
    id: p.integer().primary().autoincrement(),
    repoId: p.integer(),
    number: p.integer(),
    title: p.text(),
    body: p.text().default(''),
    state: p.string(),
    severity: p.string().default('none'),
    authorId: p.integer().nullable(),
    /** Label ids in the order they were added (GIN-indexed for the `label` filter). */
    labelIds: p.array(),
    /** Assignee user ids in the order they were assigned (GIN-indexed for the `assignee` filter). */
    assigneeIds: p.array(),
    /** Maintained in the comment transaction, so the `comments` sort needs no join. */
    commentCount: p.integer().default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()),
    closedAt: p.datetime().nullable(),
  },
});
export type Issue = InferEntity<typeof Issue>;

export const IssueComment = defineEntity({
  name: 'IssueComment',
  tableName: 'issue_comments',
  properties: {
    id: p.integer().primary().autoincrement(),
    issueId: p.integer(),
    authorId: p.integer().nullable(),
    body: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type IssueComment = InferEntity<typeof IssueComment>;

/** A label of the catalog: `admin` (site-wide), `org` (`orgId`) or `repo` (`repoId`) scope. */
export const Label = defineEntity({
  name: 'Label',
  tableName: 'labels',
  properties: {
    id: p.integer().primary().autoincrement(),
    scope: p.string(),
    orgId: p.integer().nullable(),
    repoId: p.integer().nullable(),
    name: p.string(),
    color: p.string(),
    description: p.text().default(''),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Label = InferEntity<typeof Label>;

/**
 * Per-repository issue number counter (locked by the creating transaction's upsert) and issue
 * counts per state (kept in the transaction of every state change; unfiltered list totals).
 */
export const RepoCounter = defineEntity({
  name: 'RepoCounter',
  tableName: 'repo_counters',
  properties: {
    repoId: p.integer().primary(),
    lastIssueNumber: p.integer().default(0),
    issuesNew: p.integer().default(0),
    issuesOpen: p.integer().default(0),
    issuesClosed: p.integer().default(0),
  },
});
export type RepoCounter = InferEntity<typeof RepoCounter>;

export const issueEntities = [Issue, IssueComment, Label, RepoCounter];
