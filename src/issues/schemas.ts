import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { nonBlank } from '../http/input.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import { userRefJson, userRefSchema, type UserRefJson } from '../users/schemas.ts';
import type { UserRefRow } from '../users/service.ts';
import type { CommentRow, LabelRow } from './repository.ts';

/** Request and response shapes of issues, comments and labels, and the mappers from rows. */

export const SEVERITIES = ['none', 'low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];
export const ISSUE_STATES = ['new', 'open', 'closed'] as const;
export type IssueState = (typeof ISSUE_STATES)[number];
export const LABEL_SCOPES = ['admin', 'org', 'repo'] as const;
export type LabelScope = (typeof LABEL_SCOPES)[number];

// ----- requests ----------------------------------------------------------------------------------

/** Severity is case-insensitive on input and stored lowercase. */
export const severitySchema = z
  .string()
  .toLowerCase()
  .pipe(z.enum(SEVERITIES, { message: `must be one of ${SEVERITIES.join(', ')} (case-insensitive)` }))
  .meta({ enum: [...SEVERITIES], description: 'case-insensitive' });

const titleSchema = z.string().max(1000).trim().min(1, 'must not be empty').meta(nonBlank);
const textBody = z.string().max(100_000);
const labelName = z.string().max(100).trim().min(1, 'must not be empty').meta(nonBlank);

/** An assignee reference: a user id, a username, a display name, or several (then naming the same member). */
export const assigneeRef = z
  .object({
    user_id: z.number().int().positive().max(2_147_483_647).optional(),
    username: z.string().max(255).trim().min(1).meta(nonBlank).optional(),
    display_name: z.string().max(255).trim().min(1).meta(nonBlank).optional(),
  })
  .strict()
  .refine((a) => a.user_id !== undefined || a.username !== undefined || a.display_name !== undefined, {
    message: 'give user_id, username or display_name',
  })
  .meta({ minProperties: 1 });
export type AssigneeRef = z.infer<typeof assigneeRef>;

export const createIssueBody = z
  .object({
    title: titleSchema,
    body: textBody.optional(),
    severity: severitySchema.optional(),
    labels: z.array(labelName).max(100).optional(),
    assignees: z.array(assigneeRef).max(1000).optional(),
  })
  .strict();
export type CreateIssueBody = z.infer<typeof createIssueBody>;

export const updateIssueBody = z
  .object({
    title: titleSchema.optional(),
    body: textBody.optional(),
    state: z.enum(['open', 'closed']).optional(),
    severity: severitySchema.optional(),
  })
  .strict();
export type UpdateIssueBody = z.infer<typeof updateIssueBody>;

export const commentBody = z
  .object({ body: textBody.refine((b) => b.trim() !== '', 'must not be empty').meta(nonBlank) })
  .strict();
export const addLabelBody = z.object({ name: labelName }).strict();

export const createLabelBody = z
  .object({
    name: labelName,
    color: z.string().regex(/^#[0-9A-Fa-f]{6}$/, 'must be "#" followed by 6 hex digits'),
    description: z.string().max(1000).optional(),
  })
  .strict();
export type CreateLabelBody = z.infer<typeof createLabelBody>;
/** A change of a label (web only): any of the fields of create, validated the same way. */
export const updateLabelBody = createLabelBody.partial().strict();
export type UpdateLabelBody = z.infer<typeof updateLabelBody>;

export const ISSUE_SORTS = ['newest', 'oldest', 'updated', 'comments'] as const;
export type IssueSort = (typeof ISSUE_SORTS)[number];
export const listIssuesQuery = pageQuery().extend({
  state: z.enum(['new', 'open', 'closed', 'active', 'all']).default('open'),
  severity: severitySchema.optional(),
  label: z.string().min(1).max(100).optional(),
  assignee: z.string().min(1).max(255).meta({ description: 'a username or a display name' }).optional(),
  author: z.string().min(1).max(255).meta({ description: 'a username or a display name' }).optional(),
  q: z.string().max(255).optional(),
  sort: z.enum(ISSUE_SORTS).default('newest'),
});
export type ListIssuesQuery = z.infer<typeof listIssuesQuery>;
export type StateFilter = ListIssuesQuery['state'];

// ----- responses ---------------------------------------------------------------------------------

export const severityEnum = z.enum(SEVERITIES).meta({ id: 'Severity' });
export const issueStateEnum = z.enum(ISSUE_STATES).meta({ id: 'IssueState' });

export const labelSchema = z
  .object({
    id: z.int(),
    name: z.string(),
    color: z.string().meta({ description: '"#" and 6 hex digits' }),
    scope: z.enum(LABEL_SCOPES).meta({ id: 'LabelScope' }),
  })
  .meta({ id: 'Label' });
export type IssueLabelJson = z.infer<typeof labelSchema>;

/** A label of the catalog: with its description. */
export const catalogLabelSchema = z
  .object({ ...labelSchema.shape, description: z.string() })
  .meta({ id: 'CatalogLabel' });
export type LabelJson = z.infer<typeof catalogLabelSchema>;

export const commentSchema = z
  .object({
    id: z.int(),
    body: z.string(),
    author: userRefSchema.optional().meta({ description: 'absent when the author no longer exists' }),
    created_at: timestamp,
  })
  .meta({ id: 'Comment' });
export type CommentJson = z.infer<typeof commentSchema>;

export const issueSchema = z
  .object({
    id: z.int(),
    number: z.int().meta({ description: 'per-repository number used in paths' }),
    title: z.string(),
    body: z.string(),
    state: issueStateEnum,
    severity: severityEnum,
    author: userRefSchema.optional().meta({ description: 'absent when the author no longer exists' }),
    labels: z.array(labelSchema),
    assignees: z.array(userRefSchema),
    comments: z
      .array(commentSchema)
      .optional()
      .meta({ description: 'single issue read only, and only when the issue has comments' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Issue' });
export type IssueJson = z.infer<typeof issueSchema>;

export function labelJson(l: LabelRow): IssueLabelJson {
  return { id: l.id, name: l.name, color: l.color, scope: l.scope };
}

export function catalogLabelJson(l: LabelRow): LabelJson {
  return { ...labelJson(l), description: l.description };
}

/** A user reference, or nothing when the user no longer exists. */
export function optionalRef(users: Map<number, UserRefRow>, id: number | null): UserRefJson | undefined {
  const u = id === null ? undefined : users.get(id);
  return u === undefined ? undefined : userRefJson(u);
}

export function commentJson(c: CommentRow, authors: Map<number, UserRefRow>): CommentJson {
  const author = optionalRef(authors, c.author_id);
  return {
    id: c.id,
    body: c.body,
    ...(author === undefined ? {} : { author }),
    created_at: isoTime(c.created_at),
  };
}
