/**
 * Pull requests in the earlier API variant (docs/api-variants.md): create takes `source_bookmark`
 * and `target_branch` (default: the repository's default branch, `default` in Mercurial), and the
 * records carry those two names instead of `source_ref`, `target_ref` and `ref_type`. The request
 * parses into the current form and the answers are made from the current records.
 */
import { z } from 'zod';
import { omit, shaped } from '../http/variant.ts';
import { createPullBody, pullSchema, type CreatePullBody, type PullJson } from './schemas.ts';

export const earlierCreatePullBody = z
  .strictObject({
    title: createPullBody.shape.title,
    body: createPullBody.shape.body,
    source_bookmark: createPullBody.shape.source_ref.meta({ description: 'the bookmark or branch to merge' }),
    target_branch: createPullBody.shape.source_ref.optional().meta({
      description:
        "the branch to merge into; default: the repository's default branch (`default` in Mercurial)",
    }),
  })
  .transform((b): CreatePullBody => ({
    title: b.title,
    ...(b.body === undefined ? {} : { body: b.body }),
    source_ref: b.source_bookmark,
    ...(b.target_branch === undefined ? {} : { target_ref: b.target_branch }),
  }));

export const earlierPullSchema = pullSchema
  .omit({ source_ref: true, target_ref: true, ref_type: true })
  .extend({
    source_bookmark: z.string().meta({ description: 'the bookmark or branch merged from' }),
    target_branch: z.string().meta({ description: 'the branch merged into' }),
  })
  .meta({ id: 'PullRequest' });
export type EarlierPullJson = z.infer<typeof earlierPullSchema>;

/** A pull request as the earlier variant shows it. */
export function earlierPull(p: PullJson): EarlierPullJson {
  const rest = omit(p, 'source_ref', 'target_ref', 'ref_type');
  return { ...rest, source_bookmark: p.source_ref, target_branch: p.target_ref };
}

export const earlierPullShape = shaped(earlierPullSchema, earlierPull);
