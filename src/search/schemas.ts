import { z } from 'zod';
import { nonBlank } from '../http/input.ts';
import { pageQuery } from '../http/pagination.ts';
import { issueSchema, type IssueJson } from '../issues/schemas.ts';
import { pullSchema, type PullJson } from '../pulls/schemas.ts';
import { earlierIssue, earlierIssueSchema } from '../issues/earlier.ts';
import { earlierPull, earlierPullSchema } from '../pulls/earlier.ts';
import { omit, shaped } from '../http/variant.ts';

/** Request and response shapes of search (repositories; issues and pull requests of a repository). */

// ----- requests ----------------------------------------------------------------------------------

/** The text searched for: web-search syntax (words, "a phrase", or, -word). */
const searchText = z
  .string()
  .max(255)
  .trim()
  .min(1, 'must not be empty')
  .meta({ ...nonBlank, description: 'words (all must match), "a phrase", `or`, `-word`' });

export const SEARCH_KINDS = ['issue', 'pull'] as const;
export type SearchKind = (typeof SEARCH_KINDS)[number];

export const searchIssuesQuery = pageQuery().extend({
  q: searchText,
  kind: z
    .enum(SEARCH_KINDS)
    .optional()
    .meta({ description: 'only issues or only pull requests (default: both)' }),
});
export type SearchIssuesQuery = z.infer<typeof searchIssuesQuery>;

export const searchReposQuery = pageQuery().extend({
  q: z
    .string()
    .max(255)
    .trim()
    .min(1, 'must not be empty')
    .meta({ ...nonBlank, description: 'a part of the name, or words of the description' }),
});
export type SearchReposQuery = z.infer<typeof searchReposQuery>;

// ----- responses ---------------------------------------------------------------------------------

export const issueHitSchema = z
  .object({ kind: z.literal('issue'), ...issueSchema.omit({ comments: true }).shape })
  .meta({ id: 'IssueSearchItem' });
export const pullHitSchema = z
  .object({ kind: z.literal('pull'), ...pullSchema.omit({ comments: true }).shape })
  .meta({ id: 'PullRequestSearchItem' });
export const searchHitSchema = z
  .discriminatedUnion('kind', [issueHitSchema, pullHitSchema])
  .meta({ id: 'IssueSearchResult', description: 'an issue or a pull request, as its list shows it' });
export type SearchHitJson = z.infer<typeof searchHitSchema>;

export function issueHit(i: IssueJson): SearchHitJson {
  return { kind: 'issue', ...i };
}

export function pullHit(p: PullJson): SearchHitJson {
  return { kind: 'pull', ...p };
}

// ----- the earlier API variant ------------------------------------------------------------------

export const earlierSearchHitSchema = z
  .discriminatedUnion('kind', [
    z
      .object({ kind: z.literal('issue'), ...earlierIssueSchema.omit({ comments: true }).shape })
      .meta({ id: 'IssueSearchItem' }),
    z
      .object({ kind: z.literal('pull'), ...earlierPullSchema.omit({ comments: true }).shape })
      .meta({ id: 'PullRequestSearchItem' }),
  ])
  .meta({ id: 'IssueSearchResult', description: 'an issue or a pull request, as its list shows it' });

/** A search item as the earlier variant shows it: the earlier list forms plus `kind`. */
export const earlierSearchHitShape = shaped(earlierSearchHitSchema, (h: SearchHitJson) => {
  if (h.kind === 'issue') return { kind: 'issue' as const, ...earlierIssue(omit(h, 'kind')) };
  return { kind: 'pull' as const, ...earlierPull(omit(h, 'kind')) };
});
