/**
 * Commits in the earlier API variant (docs/api-variants.md): changesets, log entries and the
 * commits of ref lists name a commit by `node` (the full id), `short_node` and `rev` (an integer
 * unique and stable within the repository: src/repos/commit-revs.ts) instead of `id` and
 * `short_id`. Made from the current records, which the route reads with their `rev`.
 */
import { z } from 'zod';
import { omit, shaped } from '../http/variant.ts';
import type { RefEntry } from '../vcs/reader.ts';
import { changesetSchema, commitSchema, compareSchema, refSchema } from './schemas.ts';
import type { Revved } from './contents-service.ts';

const naming = {
  node: z.string().meta({ description: 'full revision identifier' }),
  short_node: z.string(),
  rev: z.int().min(0).meta({
    description:
      "integer revision, unique and stable within the repository: Mercurial's revision number, Fossil's rid, for Git the commit's position in the order commits arrived",
  }),
};
export const earlierCommitSchema = commitSchema
  .omit({ id: true, short_id: true })
  .extend(naming)
  .meta({ id: 'Commit' });
export const earlierChangesetSchema = changesetSchema
  .omit({ id: true, short_id: true })
  .extend(naming)
  .meta({ id: 'Changeset' });
export const earlierRefSchema = z
  .object({
    ...refSchema.shape,
    commit: z
      .object({
        ...naming,
        subject: commitSchema.shape.subject,
        author: commitSchema.shape.author,
        date: commitSchema.shape.date,
      })
      .meta({ description: 'the commit the ref names (a branch: its head)' }),
  })
  .meta({ id: 'Ref' });

/** `id`, `short_id` and the looked-up `rev` as `node`, `short_node` and `rev`. */
function renamed<T extends { id: string; short_id: string }>(c: Revved<T>) {
  if (c.rev === undefined) throw new Error(`no rev for commit ${c.id}`);
  return { node: c.id, short_node: c.short_id, rev: c.rev, ...omit(c, 'id', 'short_id', 'rev') };
}

export const earlierCommitShape = shaped(earlierCommitSchema, (c: Revved<z.infer<typeof commitSchema>>) =>
  renamed(c),
);
export const earlierChangesetShape = shaped(
  earlierChangesetSchema,
  (c: Revved<z.infer<typeof changesetSchema>>) => renamed(c),
);
export const earlierRefShape = shaped(
  earlierRefSchema,
  (r: Omit<RefEntry, 'commit'> & { commit: Revved<RefEntry['commit']> }) => ({
    ...r,
    commit: renamed(r.commit),
  }),
);

/** A compare (an extension endpoint) with its commits in the earlier form. */
export const earlierCompareSchema = compareSchema
  .extend({ commits: z.array(earlierCommitSchema).meta(compareSchema.shape.commits.meta() ?? {}) })
  .meta({ id: 'Compare' });
export const earlierCompareShape = shaped(
  earlierCompareSchema,
  (
    c: Omit<z.infer<typeof compareSchema>, 'commits'> & { commits: Revved<z.infer<typeof commitSchema>>[] },
  ) => ({
    ...c,
    commits: c.commits.map(renamed),
  }),
);
