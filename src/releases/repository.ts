import { Assignments, count, first, one, type Db } from '../db/query.ts';
import { intArray, textArray } from '../db/sql.ts';

/** The queries of releases: `releases` and `release_assets` (bytes in the blob store, by `blob_key`). */

export type ReleaseRow = {
  id: number;
  repo_id: number;
  tag_name: string;
  target_commitish: string;
  name: string;
  body: string;
  draft: boolean;
  prerelease: boolean;
  author_id: number | null;
  created_at: Date | string;
  published_at: Date | string | null;
};
export type AssetRow = {
  id: number;
  release_id: number;
  name: string;
  label: string;
  /** bigint: PostgreSQL's driver hands it over as a string. */
  size: string | number;
  content_type: string;
  sha256: string;
  blob_key: string;
  download_count: number;
  uploader_id: number | null;
  created_at: Date | string;
};

const RELEASE = `r.id, r.repo_id, r.tag_name, r.target_commitish, r.name, r.body, r.draft, r.prerelease,
  r.author_id, r.created_at, r.published_at`;
const ASSET = `a.id, a.release_id, a.name, a.label, a.size, a.content_type, a.sha256, a.blob_key,
  a.download_count, a.uploader_id, a.created_at`;
/** Drafts only when the caller may see them. */
const VISIBLE = `(not r.draft or ?::boolean)`;

export async function list(
  db: Db,
  repoId: number,
  drafts: boolean,
  limit: number,
  offset: number,
): Promise<{ rows: ReleaseRow[]; total: number }> {
  const rows = await db.execute<ReleaseRow[]>(
    `select ${RELEASE} from releases r where r.repo_id = ? and ${VISIBLE}
      order by r.created_at desc, r.id desc limit ? offset ?`,
    [repoId, drafts, limit, offset],
  );
  const total = await count(db, `select count(*) as n from releases r where r.repo_id = ? and ${VISIBLE}`, [
    repoId,
    drafts,
  ]);
  return { rows, total };
}

export function byId(db: Db, repoId: number, id: number): Promise<ReleaseRow | undefined> {
  return first<ReleaseRow>(db, `select ${RELEASE} from releases r where r.repo_id = ? and r.id = ?`, [
    repoId,
    id,
  ]);
}

export function byTag(db: Db, repoId: number, tag: string): Promise<ReleaseRow | undefined> {
  return first<ReleaseRow>(db, `select ${RELEASE} from releases r where r.repo_id = ? and r.tag_name = ?`, [
    repoId,
    tag,
  ]);
}

/** The newest published release that is no prerelease (by the time it was published). */
export function latest(db: Db, repoId: number): Promise<ReleaseRow | undefined> {
  return first<ReleaseRow>(
    db,
    `select ${RELEASE} from releases r
      where r.repo_id = ? and not r.draft and not r.prerelease and r.published_at is not null
      order by r.published_at desc, r.id desc limit 1`,
    [repoId],
  );
}

/** Inserts a release; undefined when the tag already has one. */
export function insert(
  db: Db,
  r: Omit<ReleaseRow, 'id' | 'created_at' | 'published_at'>,
): Promise<ReleaseRow | undefined> {
  return first<ReleaseRow>(
    db,
    `insert into releases as r (repo_id, tag_name, target_commitish, name, body, draft, prerelease, author_id, published_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, case when ? then null else now() end)
     on conflict (repo_id, tag_name) do nothing
     returning ${RELEASE}`,
    [r.repo_id, r.tag_name, r.target_commitish, r.name, r.body, r.draft, r.prerelease, r.author_id, r.draft],
  );
}

/** Changes the given fields; publishing a draft sets `published_at`, making one a draft clears it. */
export function update(
  db: Db,
  id: number,
  f: Partial<Pick<ReleaseRow, 'tag_name' | 'target_commitish' | 'name' | 'body' | 'draft' | 'prerelease'>>,
): Promise<ReleaseRow> {
  const a = new Assignments();
  for (const k of ['tag_name', 'target_commitish', 'name', 'body', 'prerelease'] as const) {
    if (f[k] !== undefined) a.add(`${k} = ?`, f[k]);
  }
  if (f.draft !== undefined) {
    a.add(
      `draft = ?, published_at = case when ? then null else coalesce(r.published_at, now()) end`,
      f.draft,
      f.draft,
    );
  }
  a.add('updated_at = now()');
  return one<ReleaseRow>(db, `update releases as r set ${a.sql} where r.id = ? returning ${RELEASE}`, [
    ...a.params,
    id,
  ]);
}

export async function remove(db: Db, id: number): Promise<void> {
  await db.execute(`delete from releases where id = ?`, [id]);
}

// ----- assets ------------------------------------------------------------------------------------

export function assetsOf(db: Db, releaseIds: readonly number[]): Promise<AssetRow[]> {
  if (releaseIds.length === 0) return Promise.resolve([]);
  return db.execute<AssetRow[]>(
    `select ${ASSET} from release_assets a where a.release_id = any(?::int[]) order by a.release_id, a.id`,
    [intArray(releaseIds)],
  );
}

export function asset(db: Db, releaseId: number, id: number): Promise<AssetRow | undefined> {
  return first<AssetRow>(db, `select ${ASSET} from release_assets a where a.release_id = ? and a.id = ?`, [
    releaseId,
    id,
  ]);
}

/** Inserts an asset; undefined when the release already has one of that name. */
export function insertAsset(
  db: Db,
  a: Omit<AssetRow, 'id' | 'download_count' | 'created_at'> & { repo_id: number },
): Promise<AssetRow | undefined> {
  return first<AssetRow>(
    db,
    `insert into release_assets as a (release_id, repo_id, name, label, size, content_type, sha256, blob_key, uploader_id)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?)
     on conflict (release_id, name) do nothing
     returning ${ASSET}`,
    [a.release_id, a.repo_id, a.name, a.label, a.size, a.content_type, a.sha256, a.blob_key, a.uploader_id],
  );
}

export function nameTaken(db: Db, releaseId: number, name: string): Promise<boolean> {
  return first(db, `select 1 from release_assets where release_id = ? and name = ?`, [releaseId, name]).then(
    (r) => r !== undefined,
  );
}

export async function countDownload(db: Db, id: number): Promise<void> {
  await db.execute(`update release_assets set download_count = download_count + 1 where id = ?`, [id]);
}

/** Deletes one asset row; its blob key, or undefined when it was gone already. */
export async function removeAsset(db: Db, id: number): Promise<string | undefined> {
  const r = await first<{ blob_key: string }>(
    db,
    `delete from release_assets where id = ? returning blob_key`,
    [id],
  );
  return r?.blob_key;
}

/** Which of these blob keys have an asset row (the sweeper keeps those). */
export async function knownKeys(db: Db, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const rows = await db.execute<{ blob_key: string }[]>(
    `select blob_key from release_assets where blob_key = any(?::text[])`,
    [textArray(keys)],
  );
  return new Set(rows.map((r) => r.blob_key));
}
