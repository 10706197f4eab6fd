import { z } from 'zod';
import { timestamp } from '../http/responses.ts';
import { userRefSchema } from '../users/schemas.ts';
import { ISSUE_STATES, SEVERITIES } from './service.ts';

/** Response shapes of issues, comments and labels; the service's JSON mappers return these types. */
export const LABEL_SCOPES = ['admin', 'org', 'repo'] as const;

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
