import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { nonBlank } from '../http/input.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestamp } from '../http/responses.ts';
import type { AssetRow, ReleaseRow } from './repository.ts';

/** Request and response shapes of releases and release assets, and the mappers from rows. */

// ----- requests ----------------------------------------------------------------------------------

const tagName = z.string().min(1, 'must not be empty').max(255).meta(nonBlank);
const commitish = z.string().max(255).trim().min(1, 'must not be empty').meta(nonBlank);

export const createReleaseBody = z.object({
  tag_name: tagName,
  target_commitish: commitish
    .optional()
    .meta({ description: 'commit, branch or bookmark where `tag_name` is created when it does not exist' }),
  name: z.string().max(1000).optional(),
  body: z.string().max(100_000).optional(),
  draft: z.boolean().optional(),
  prerelease: z.boolean().optional(),
});
export type CreateReleaseBody = z.infer<typeof createReleaseBody>;

export const updateReleaseBody = createReleaseBody.partial();
export type UpdateReleaseBody = z.infer<typeof updateReleaseBody>;

export const listReleasesQuery = pageQuery();

/** JavaScript's `trim` set, spelled out (`\s` differs between regex dialects). */
const SPACE = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
/** A character of an asset name: no control character, no slash or backslash. */
const NAME_CHAR = '\\u0000-\\u001f\\u007f/\\\\';
/** An asset name as the service takes it once trimmed: not blank, no control characters or slashes. */
const ASSET_NAME = `^[${SPACE}]*(?:[^${NAME_CHAR}${SPACE}](?:[^${NAME_CHAR}]*[^${NAME_CHAR}${SPACE}])?)[${SPACE}]*$`;

/**
 * The parts of an asset upload (`multipart/form-data`), for the document: the upload is read as
 * it streams (`multipartUpload`), and the name and label are judged by the assets service.
 */
export const assetUploadForm = z.object({
  attachment: z
    .string()
    .meta({ format: 'binary', description: 'the file (its part file name names the asset)' }),
  name: z.string().max(255).optional().meta({
    description: 'the asset name (default: the file name), trimmed; no control characters or slashes',
    pattern: ASSET_NAME,
  }),
  label: z.string().max(1000).optional().meta({
    description: 'a label shown instead of the name; line breaks and tabs allowed',
    pattern: '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$',
  }),
});

// ----- responses ---------------------------------------------------------------------------------

const personSchema = z.object({ id: z.int(), username: z.string() }).meta({ id: 'ReleasePerson' });
type Person = z.infer<typeof personSchema>;

export const assetSchema = z
  .object({
    id: z.int(),
    name: z.string(),
    label: z.string(),
    size: z.int(),
    content_type: z.string(),
    digest: z.string().meta({ description: '`sha256:<hex>` of the bytes' }),
    download_count: z.int(),
    created_at: timestamp,
    uploader: personSchema.nullable().meta({ description: 'null when the uploader no longer exists' }),
    browser_download_url: z.string(),
  })
  .meta({ id: 'ReleaseAsset' });
export type AssetJson = z.infer<typeof assetSchema>;

export const releaseSchema = z
  .object({
    id: z.int(),
    tag_name: z.string(),
    target_commitish: z.string(),
    name: z.string(),
    body: z.string(),
    draft: z.boolean(),
    prerelease: z.boolean(),
    author: personSchema.nullable().meta({ description: 'null when the author no longer exists' }),
    created_at: timestamp,
    published_at: timestamp.nullable().meta({ description: 'null for a draft' }),
    tarball_url: z.string(),
    zipball_url: z.string(),
    assets: z.array(assetSchema),
  })
  .meta({ id: 'Release' });
export type ReleaseJson = z.infer<typeof releaseSchema>;

// ----- mappers -----------------------------------------------------------------------------------

/** `{base}/api/v1/repos/:org/:repo` of the repository the records belong to. */
export type RepoUrl = string;

export function assetJson(a: AssetRow, releaseUrl: string, people: Map<number, Person>): AssetJson {
  return {
    id: a.id,
    name: a.name,
    label: a.label,
    size: Number(a.size),
    content_type: a.content_type,
    digest: `sha256:${a.sha256}`,
    download_count: a.download_count,
    created_at: isoTime(a.created_at),
    uploader: a.uploader_id === null ? null : (people.get(a.uploader_id) ?? null),
    browser_download_url: `${releaseUrl}/assets/${a.id}/download`,
  };
}

export function releaseJson(
  r: ReleaseRow,
  repoUrl: RepoUrl,
  assets: readonly AssetRow[],
  people: Map<number, Person>,
): ReleaseJson {
  const archive = `${repoUrl}/archive/${encodeURIComponent(r.tag_name)}`;
  const self = `${repoUrl}/releases/${r.id}`;
  return {
    id: r.id,
    tag_name: r.tag_name,
    target_commitish: r.target_commitish,
    name: r.name,
    body: r.body,
    draft: r.draft,
    prerelease: r.prerelease,
    author: r.author_id === null ? null : (people.get(r.author_id) ?? null),
    created_at: isoTime(r.created_at),
    published_at: r.published_at === null ? null : isoTime(r.published_at),
    tarball_url: `${archive}.tar.gz`,
    zipball_url: `${archive}.zip`,
    assets: assets.map((a) => assetJson(a, self, people)),
  };
}
