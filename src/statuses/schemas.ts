import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import { userRefJson, userRefSchema } from '../users/schemas.ts';
import type { UserRefRow } from '../users/service.ts';

/** Request and response shapes of commit statuses, and the `checks` of a pull request. */

export const STATUS_STATES = ['pending', 'success', 'failure', 'error'] as const;
export type StatusState = (typeof STATUS_STATES)[number];
export const CHECK_STATES = ['none', 'pending', 'success', 'failure'] as const;
export type CheckState = (typeof CHECK_STATES)[number];

/** The context Triad's own pipelines report under. */
export const PIPELINE_CONTEXT = 'triad/pipeline';

export const createStatusBody = z
  .object({
    state: z.enum(STATUS_STATES).meta({ id: 'CommitStatusState' }),
    context: z
      .string()
      .max(255)
      .refine((c) => c.trim() !== '', 'must not be empty')
      // a required pipeline must not be satisfied by a status someone posts in Triad's name
      .refine(
        (c) => !c.toLowerCase().startsWith('triad/'),
        'contexts under triad/ are reserved for Triad itself',
      )
      .meta({
        description: 'what reports, e.g. `ci/lint` (at most 255 characters; `triad/…` is reserved for Triad)',
      }),
    description: z.string().max(1000).optional(),
    target_url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .max(2048)
      .optional()
      .meta({ description: 'a page about this status (http or https)' }),
  })
  .strict();
export type CreateStatusBody = z.infer<typeof createStatusBody>;

export const listStatusesQuery = pageQuery();

export const statusSchema = z
  .object({
    id: z.int(),
    commit: z.string().meta({ description: 'the full commit id' }),
    state: z.enum(STATUS_STATES),
    context: z.string(),
    description: z.string().nullable(),
    target_url: z.string().nullable(),
    creator: userRefSchema
      .nullable()
      .meta({ description: "null for Triad's own pipelines, or when the user no longer exists" }),
    latest: z.boolean().meta({ description: 'the newest status of its context on this commit' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'CommitStatus' });
export type StatusJson = z.infer<typeof statusSchema>;

export const checksSchema = z
  .object({
    state: z.enum(CHECK_STATES).meta({
      description:
        '`none`: no context required or reported on the head; `failure`: a context failed (`error` counts as `failure`); `pending`: a context is pending, or a required one has no status yet; else `success`. A merge waits only for the required contexts.',
    }),
    contexts: z.array(
      z.object({
        context: z.string(),
        state: z.enum(['pending', 'success', 'failure', 'error']).meta({
          description:
            'the latest status of the context on the head commit (`pending` when a required one has none)',
        }),
        target_url: z.string().nullable(),
      }),
    ),
  })
  .meta({ id: 'PullRequestChecks' });
export type ChecksJson = z.infer<typeof checksSchema>;

export type StatusRow = {
  id: number;
  commit: string;
  state: StatusState;
  context: string;
  description: string | null;
  target_url: string | null;
  creator_id: number | null;
  latest: boolean;
  created_at: Date | string;
  updated_at: Date | string;
};

export function statusJson(r: StatusRow, users: Map<number, UserRefRow>): StatusJson {
  const creator = r.creator_id === null ? undefined : users.get(r.creator_id);
  return {
    id: r.id,
    commit: r.commit,
    state: r.state,
    context: r.context,
    description: r.description,
    target_url: r.target_url,
    creator: creator === undefined ? null : userRefJson(creator),
    latest: r.latest,
    created_at: isoTime(r.created_at),
    updated_at: isoTime(r.updated_at),
  };
}
