import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { nonBlank } from '../http/input.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import { checksSchema } from '../statuses/schemas.ts';
import { userRefJson, userRefSchema } from '../users/schemas.ts';
import type { UserRefRow } from '../users/service.ts';
import type { PullCommentRow, PullRow } from './repository.ts';

/** Request and response shapes of pull requests and their comments, and the mappers from rows. */

export const PULL_STATUSES = ['open', 'closed', 'merged'] as const;
export type PullStatus = (typeof PULL_STATUSES)[number];
export const MERGEABLE_STATES = ['clean', 'conflict', 'behind', 'empty', 'checking'] as const;
export type MergeableState = (typeof MERGEABLE_STATES)[number];
export const MERGE_STYLES = ['merge', 'ff-only', 'squash'] as const;

// ----- requests ----------------------------------------------------------------------------------

const titleSchema = z.string().max(1000).trim().min(1, 'must not be empty').meta(nonBlank);
const textBody = z.string().max(100_000);
const refName = z.string().min(1, 'must not be empty').max(255);
/** A commit id as the API answers it (`head_commit`, `base_commit`). */
const commitId = z
  .string()
  .regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'must be a full commit id (40 or 64 lowercase hex digits)');

/** `ref_type` is response-only: a request naming it is refused by the strict objects (400). */
export const createPullBody = z
  .object({
    title: titleSchema,
    body: textBody.optional(),
    source_ref: refName,
    target_ref: refName.optional().meta({
      description: 'default: `@` (Mercurial), the default branch (Git, Fossil)',
    }),
  })
  .strict();
export type CreatePullBody = z.infer<typeof createPullBody>;

export const updatePullBody = z
  .object({
    title: titleSchema.optional(),
    body: textBody.optional(),
    state: z.enum(['open', 'closed']).optional(),
  })
  .strict();
export type UpdatePullBody = z.infer<typeof updatePullBody>;

export const mergePullBody = z
  .object({
    style: z.enum(MERGE_STYLES).default('merge'),
    message: z.string().max(10_000).trim().min(1).meta(nonBlank).optional(),
    expected_head: commitId.optional(),
    expected_target_head: commitId.optional(),
    delete_source: z.boolean().default(false),
  })
  .strict()
  .default({ style: 'merge', delete_source: false });
export type MergePullBody = z.infer<typeof mergePullBody>;

export const pullCommentBody = z
  .object({ body: textBody.refine((b) => b.trim() !== '', 'must not be empty').meta(nonBlank) })
  .strict();

export const listPullsQuery = pageQuery().extend({
  status: z.enum(PULL_STATUSES).default('open'),
});
export type ListPullsQuery = z.infer<typeof listPullsQuery>;

// ----- responses ---------------------------------------------------------------------------------

const authorRef = userRefSchema.optional().meta({ description: 'absent when the author no longer exists' });

export const pullCommentSchema = z
  .object({ id: z.int(), body: z.string(), author: authorRef, created_at: timestamp })
  .meta({ id: 'PullRequestComment' });
export type PullCommentJson = z.infer<typeof pullCommentSchema>;

export const pullSchema = z
  .object({
    id: z.int(),
    number: z.int().meta({ description: 'per-repository number used in paths' }),
    title: z.string(),
    body: z.string(),
    status: z.enum(PULL_STATUSES).meta({ id: 'PullRequestStatus' }),
    source_ref: z.string(),
    target_ref: z.string(),
    ref_type: z
      .enum(['bookmark', 'branch'])
      .meta({ description: '`bookmark` (Mercurial), `branch` (Git, Fossil)' }),
    author: authorRef,
    head_commit: z.string().meta({ description: 'the source head' }),
    base_commit: z.string().meta({ description: 'the target head' }),
    mergeable_state: z.enum(MERGEABLE_STATES).meta({
      id: 'MergeableState',
      description:
        '`behind`: the source is already contained in the target; `empty`: merging changes no file; `checking`: the check exceeded its time budget and goes on (read again)',
    }),
    conflicted_files: z.array(z.string()),
    commits_ahead: z.int(),
    commits_behind: z.int(),
    merged_by: userRefSchema.nullable(),
    merged_at: timestamp.nullable(),
    merge_commit: z.string().nullable().meta({ description: "after a merge, the target's new head" }),
    comments_count: z.int(),
    checks: checksSchema.optional().meta({
      description:
        "the commit statuses of the head commit: the contexts the target's protection rules require (`triad/pipeline` for a required pipeline) and every context reported",
    }),
    comments: z
      .array(pullCommentSchema)
      .optional()
      .meta({ description: 'single read only (`[]` when none)' }),
    created_at: timestamp,
    updated_at: timestamp,
    closed_at: timestamp.nullable(),
  })
  .meta({ id: 'PullRequest' });
export type PullJson = z.infer<typeof pullSchema>;

export function pullCommentJson(c: PullCommentRow, users: Map<number, UserRefRow>): PullCommentJson {
  const author = c.author_id === null ? undefined : users.get(c.author_id);
  return {
    id: c.id,
    body: c.body,
    ...(author === undefined ? {} : { author: userRefJson(author) }),
    created_at: isoTime(c.created_at),
  };
}

const isoOrNull = (v: Date | string | null): string | null => (v === null ? null : isoTime(v));

/** A row as JSON with the mergeability given (live, or the row's last known). */
export function pullJson(
  r: PullRow,
  refType: 'bookmark' | 'branch',
  users: Map<number, UserRefRow>,
  check: Pick<
    PullRow,
    | 'head_commit'
    | 'base_commit'
    | 'mergeable_state'
    | 'conflicted_files'
    | 'commits_ahead'
    | 'commits_behind'
  > = r,
): PullJson {
  const author = r.author_id === null ? undefined : users.get(r.author_id);
  const mergedBy = r.merged_by === null ? undefined : users.get(r.merged_by);
  return {
    id: r.id,
    number: r.number,
    title: r.title,
    body: r.body,
    status: r.status,
    source_ref: r.source_ref,
    target_ref: r.target_ref,
    ref_type: refType,
    ...(author === undefined ? {} : { author: userRefJson(author) }),
    head_commit: check.head_commit,
    base_commit: check.base_commit,
    mergeable_state: check.mergeable_state,
    conflicted_files: check.conflicted_files,
    commits_ahead: check.commits_ahead,
    commits_behind: check.commits_behind,
    merged_by: mergedBy === undefined ? null : userRefJson(mergedBy),
    merged_at: isoOrNull(r.merged_at),
    merge_commit: r.merge_commit,
    comments_count: r.comment_count,
    created_at: isoTime(r.created_at),
    updated_at: isoTime(r.updated_at),
    closed_at: isoOrNull(r.closed_at),
  };
}
