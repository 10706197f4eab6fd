import { z } from 'zod';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import { VCS_KINDS } from '../vcs/index.ts';

export const vcsEnum = z.enum(VCS_KINDS).meta({ id: 'Vcs' });

// ----- requests ----------------------------------------------------------------------------------

export const repoNameSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(
    /^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?$/,
    'letters, digits, ".", "_" and "-"; no leading "." or "-"',
  )
  .refine((n) => !n.toLowerCase().endsWith('.git'), 'must not end with ".git"')
  .refine((n) => n !== '.' && n !== '..', 'reserved name');

export const createRepoBody = z.object({
  name: repoNameSchema,
  description: z.string().max(10_000).optional(),
  is_private: z.boolean().optional(),
  vcs: z.enum(VCS_KINDS).optional(),
});
export type CreateRepoBody = z.infer<typeof createRepoBody>;
export const updateRepoBody = z
  .object({ description: z.string().max(10_000).optional(), is_private: z.boolean().optional() })
  .strict();
export type UpdateRepoBody = z.infer<typeof updateRepoBody>;

export const userReposQuery = pageQuery().extend({
  org: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .meta({ description: 'only the repositories of this organization' }),
  visibility: z
    .enum(['public', 'private'])
    .optional()
    .meta({ description: 'only public or only private ones' }),
});

// ----- responses ---------------------------------------------------------------------------------

/** Response shapes of repositories and their contents. */
export const repoSchema = z
  .object({
    id: z.int(),
    name: z.string(),
    org: z.string().meta({ description: 'owning organization name' }),
    description: z.string(),
    is_private: z.boolean(),
    vcs: vcsEnum,
    default_branch: z.string(),
    clone_url: z.string().meta({ description: 'clone and push over HTTP here' }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Repository' });
export type RepoJson = z.infer<typeof repoSchema>;

export const treeEntrySchema = z
  .object({
    name: z.string(),
    is_dir: z.boolean(),
    size: z.int().min(0).meta({ description: '0 for directories' }),
  })
  .meta({ id: 'TreeEntry' });

export const fileContentSchema = z
  .object({
    path: z.string(),
    content: z.string().meta({ description: 'the text, or base64 when `encoding` is base64' }),
    size: z.int().min(0).meta({ description: 'bytes' }),
    encoding: z.enum(['utf-8', 'base64']),
    truncated: z.boolean().meta({ description: 'the content was cut at the blob size cap' }),
  })
  .meta({ id: 'FileContent' });

const commitShape = {
  id: z.string().meta({ description: 'full revision identifier' }),
  short_id: z.string(),
  author: z.string().meta({ description: 'name and address in one string' }),
  date: timestamp,
  subject: z.string().meta({ description: 'first line of the message' }),
  message: z.string(),
  branch: z.string(),
  tags: z.array(z.string()),
};
export const commitSchema = z.object(commitShape).meta({ id: 'Commit' });
export const changesetSchema = z
  .object({
    ...commitShape,
    diff: z.string().meta({ description: 'git-style unified diff against the first parent' }),
    diff_truncated: z.boolean().meta({ description: 'the diff is incomplete (size caps)' }),
    diff_truncated_files: z
      .array(z.string())
      .meta({ description: 'files shown by their header lines only (over the per-file cap)' }),
  })
  .meta({ id: 'Changeset' });

export const refSchema = z
  .object({
    name: z.string(),
    type: z.enum(['branch', 'bookmark', 'tag']),
    default: z
      .boolean()
      .meta({ description: "the repository's default branch, or Mercurial's `@` bookmark; false for tags" }),
    commit: z
      .object({
        id: commitShape.id,
        short_id: commitShape.short_id,
        subject: commitShape.subject,
        author: commitShape.author,
        date: commitShape.date,
      })
      .meta({ description: 'the commit the ref names (a branch: its head)' }),
  })
  .meta({ id: 'Ref' });

export const compareFileSchema = z
  .object({
    path: z.string(),
    previous_path: z.string().optional().meta({ description: 'a renamed file only: its old path' }),
    status: z.enum(['added', 'modified', 'deleted', 'renamed']).meta({
      description:
        '`renamed` where the VCS records renames (Mercurial); git and Fossil show a deletion and an addition',
    }),
    additions: z.int().min(0),
    deletions: z.int().min(0),
    diff: z.string().meta({
      description:
        "the file's unified diff hunks (from its first `@@` line); empty for a binary file, a mode change only, or a file over the per-file cap",
    }),
    truncated: z.boolean().meta({
      description:
        'the file is listed without its diff: a version of it, or its diff, is over the per-file cap',
    }),
  })
  .meta({ id: 'CompareFile' });

export const compareSchema = z
  .object({
    base: z.string().meta({ description: 'the commit `base` names' }),
    head: z.string().meta({ description: 'the commit `head` names' }),
    merge_base: z
      .string()
      .nullable()
      .meta({ description: 'their most recent common ancestor; null when the histories are unrelated' }),
    total_commits: z.int().min(0).meta({ description: 'commits reachable from head and not from base' }),
    commits: z.array(commitSchema).meta({
      description: 'the first 250 of those commits, oldest first (`total_commits` counts them all)',
    }),
    files: z.array(compareFileSchema).meta({
      description: 'the diff from merge_base to head, file by file in path order (at most 3,000 files)',
    }),
    diff_truncated: z.boolean().meta({
      description:
        'the diff is incomplete: a file is listed without its diff (`truncated`), or files past the size cap of the whole diff or past the first 3,000 are left out',
    }),
  })
  .meta({ id: 'Compare' });
