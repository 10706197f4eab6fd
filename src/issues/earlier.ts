/**
 * Issues in the earlier API variant (docs/api-variants.md): no severity, no assignees, labels
 * without their scope and present only when the issue has some; create takes a title and a body,
 * update a title, body and state; the list filters by state (`new`, `open`, `closed`) only. The
 * requests parse into the current forms and the answers are made from the current records, so
 * the issue service is the same for both variants.
 */
import { z } from 'zod';
import { shaped } from '../http/variant.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import { userRefSchema } from '../users/schemas.ts';
import {
  commentSchema,
  createIssueBody,
  issueStateEnum,
  updateIssueBody,
  type CreateIssueBody,
  type IssueJson,
  type IssueLabelJson,
  type LabelJson,
  type ListIssuesQuery,
  type UpdateIssueBody,
} from './schemas.ts';

/** Fields a request of the earlier variant may not name: a clear 400 pointing to the current variant. */
function earlierOnly<S extends z.ZodRawShape>(shape: S, dropped: readonly string[]) {
  return z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `${iss.keys.join(', ')}: not ${iss.keys.length > 1 ? 'fields' : 'a field'} of the earlier API variant${
            iss.keys.some((k) => dropped.includes(k)) ? ' (send X-Svc-Api-Variant: current to use it)' : ''
          }`
        : undefined,
  });
}

export const earlierCreateIssueBody = earlierOnly(
  { title: createIssueBody.shape.title, body: createIssueBody.shape.body },
  ['severity', 'labels', 'assignees'],
).transform((b): CreateIssueBody => ({ title: b.title, ...(b.body === undefined ? {} : { body: b.body }) }));

export const earlierUpdateIssueBody = earlierOnly(
  {
    title: updateIssueBody.shape.title,
    body: updateIssueBody.shape.body,
    state: updateIssueBody.shape.state,
  },
  ['severity'],
).transform((b): UpdateIssueBody => b);

/** The earlier list: the state filter and paging; every other query parameter is ignored. */
export const earlierListIssuesQuery = pageQuery()
  .extend({ state: z.enum(['new', 'open', 'closed']).default('open') })
  .transform((q): ListIssuesQuery => ({ ...q, sort: 'newest' }));

const labelShape = {
  id: z.int(),
  name: z.string(),
  color: z.string().meta({ description: '"#" and 6 hex digits' }),
};
export const earlierLabelSchema = z.object(labelShape).meta({ id: 'Label' });
export const earlierCatalogLabelSchema = z
  .object({ ...labelShape, description: z.string() })
  .meta({ id: 'CatalogLabel' });

export const earlierIssueSchema = z
  .object({
    id: z.int(),
    number: z.int().meta({ description: 'per-repository number used in paths' }),
    title: z.string(),
    body: z.string(),
    state: issueStateEnum,
    author: userRefSchema.optional().meta({ description: 'absent when the author no longer exists' }),
    labels: z
      .array(earlierLabelSchema)
      .optional()
      .meta({ description: 'present only when the issue has labels' }),
    comments: z
      .array(commentSchema)
      .optional()
      .meta({ description: 'single issue read only, and only when the issue has comments' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Issue' });
export type EarlierIssueJson = z.infer<typeof earlierIssueSchema>;

const label = (l: IssueLabelJson) => ({ id: l.id, name: l.name, color: l.color });

/** An issue as the earlier variant shows it. */
export function earlierIssue(i: IssueJson): EarlierIssueJson {
  return {
    id: i.id,
    number: i.number,
    title: i.title,
    body: i.body,
    state: i.state,
    ...(i.author === undefined ? {} : { author: i.author }),
    ...(i.labels.length === 0 ? {} : { labels: i.labels.map(label) }),
    ...(i.comments === undefined ? {} : { comments: i.comments }),
    created_at: i.created_at,
    updated_at: i.updated_at,
  };
}

export const earlierIssueShape = shaped(earlierIssueSchema, earlierIssue);
export const earlierCatalogShape = shaped(z.array(earlierCatalogLabelSchema), (ls: LabelJson[]) =>
  ls.map((l) => ({ ...label(l), description: l.description })),
);
export const earlierCatalogLabelShape = shaped(earlierCatalogLabelSchema, (l: LabelJson) => ({
  ...label(l),
  description: l.description,
}));
