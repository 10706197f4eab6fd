import { count, first, one, namesById, Prepared, type Db } from '../db/query.ts';
import { intArray, likeEscape } from '../db/sql.ts';
import { SEARCH_CONFIG, TEXT_QUERY } from '../db/search.ts';
import type { PrivateShown, RepoRef, RepoTarget } from '../domain/repo.ts';
import type { VcsKind } from '../vcs/index.ts';

/** The queries of repository records (table `repos`; contents live in the VCS storage). */

export type RepoRow = {
  id: number;
  orgId: number;
  name: string;
  description: string;
  isPrivate: boolean;
  vcs: VcsKind;
  defaultBranch: string;
  /** The storage node that holds it (null: the server's own repository directory). */
  storageNode: string | null;
  createdAt: Date | string;
  updatedAt: Date | string;
};

const REPO_REF = 'id, org_id as "orgId", name, is_private as "isPrivate"';
/** The columns of a `RepoRow`, of the table aliased `t` when given. */
function repoColumns(t = ''): string {
  const c = t === '' ? '' : `${t}.`;
  return `${c}id, ${c}org_id as "orgId", ${c}name, ${c}is_private as "isPrivate", ${c}description, ${c}vcs,
    ${c}default_branch as "defaultBranch", ${c}storage_node as "storageNode", ${c}created_at as "createdAt", ${c}updated_at as "updatedAt"`;
}
const REPO = repoColumns();

const BY_ID = new Prepared<RepoRow>('repo_by_id', `select ${REPO} from repos where id = ?`);

export function repoById(db: Db, id: number): Promise<RepoRow | undefined> {
  return BY_ID.first(db, [id]);
}

const WITH_ORG = new Prepared<RepoRow & { orgName: string }>(
  'repo_with_org_by_id',
  `select ${repoColumns('r')}, o.name as "orgName" from repos r join orgs o on o.id = r.org_id where r.id = ?`,
);

/** The repository and its organization's name (one statement). */
export function repoWithOrg(db: Db, id: number): Promise<(RepoRow & { orgName: string }) | undefined> {
  return WITH_ORG.first(db, [id]);
}

/** Repository names compare case-insensitively within their organization. */
export function refByName(db: Db, orgId: number, name: string): Promise<RepoRef | undefined> {
  return first<RepoRef>(db, `select ${REPO_REF} from repos where org_id = ? and lower(name) = lower(?)`, [
    orgId,
    name,
  ]);
}

const TARGET = new Prepared<RepoRef & { orgName: string }>(
  'repo_target',
  `select r.id, r.org_id as "orgId", r.name, r.is_private as "isPrivate", o.name as "orgName"
     from orgs o join repos r on r.org_id = o.id
    where lower(o.name) = lower(?) and lower(r.name) = lower(?)`,
);

/**
 * A repository and its organization by their names (both case-insensitive), in one statement:
 * what every request on a repository route looks up first.
 */
export async function targetByNames(db: Db, orgName: string, name: string): Promise<RepoTarget | undefined> {
  const row = await TARGET.first(db, [orgName, name]);
  if (row === undefined) return undefined;
  const { orgName: org, ...repo } = row;
  return { org: { id: repo.orgId, name: org }, repo };
}

export function namesByIds(db: Db, ids: readonly number[]): Promise<Map<number, string>> {
  return namesById(db, 'select id, name from repos where id = any(?::int[])', ids);
}

/** One page of an organization's repositories, by name, and the total. */
export async function page(
  db: Db,
  orgId: number,
  shown: PrivateShown,
  limit: number,
  offset: number,
): Promise<{ rows: RepoRow[]; total: number }> {
  const privateFilter = shown === 'all' ? 'true' : shown === 'none' ? 'false' : 'id = ?';
  const params: unknown[] = typeof shown === 'object' ? [orgId, shown.repoId] : [orgId];
  const where = `org_id = ? and (not is_private or ${privateFilter})`;
  const total = await count(db, `select count(*) as n from repos where ${where}`, params);
  const rows = await db.execute<RepoRow[]>(
    `select ${REPO} from repos where ${where} order by lower(name) limit ? offset ?`,
    [...params, limit, offset],
  );
  return { rows, total };
}

// ----- lists across organizations -------------------------------------------------------------------

/** Which private repositories a list spanning organizations may show (see `ReposService`). */
export type RepoScope = {
  /** Those of these organizations (`all`: of any; none when empty). */
  privateOrgIds: readonly number[] | 'all';
  /** Only this one of them (a repository token). */
  privateRepoId: number | null;
};

export type RepoWithOrg = RepoRow & { orgName: string };

const WITH_ORG_NAME = `${repoColumns('r')}, o.name as "orgName"`;

/** The predicate of `scope`: every public repository, and the private ones it shows. */
function scopeSql(scope: RepoScope): { sql: string; params: unknown[] } {
  const ids = scope.privateOrgIds;
  if (ids !== 'all' && ids.length === 0) return { sql: 'not r.is_private', params: [] };
  const parts: string[] = [];
  const params: unknown[] = [];
  if (ids !== 'all') {
    parts.push('r.org_id = any(?::int[])');
    params.push(intArray(ids));
  }
  if (scope.privateRepoId !== null) {
    parts.push('r.id = ?');
    params.push(scope.privateRepoId);
  }
  return { sql: parts.length === 0 ? 'true' : `(not r.is_private or (${parts.join(' and ')}))`, params };
}

async function pageWhere(
  db: Db,
  where: string,
  params: readonly unknown[],
  order: { sql: string; params: readonly unknown[] },
  limit: number,
  offset: number,
): Promise<{ rows: RepoWithOrg[]; total: number }> {
  const from = 'repos r join orgs o on o.id = r.org_id';
  const total = await count(db, `select count(*) as n from ${from} where ${where}`, params);
  if (total <= offset) return { rows: [], total };
  const rows = await db.execute<RepoWithOrg[]>(
    `select ${WITH_ORG_NAME} from ${from} where ${where} order by ${order.sql} limit ? offset ?`,
    [...params, ...order.params, limit, offset],
  );
  return { rows, total };
}

/**
 * Repositories in `scope` whose name contains `text` (case-insensitive) or whose description
 * matches its words (full text). Ranked: the name equal to the text, then starting with it,
 * then containing it, then description matches only; ties by organization and name.
 */
export function searchPage(
  db: Db,
  text: string,
  scope: RepoScope,
  limit: number,
  offset: number,
): Promise<{ rows: RepoWithOrg[]; total: number }> {
  const s = scopeSql(scope);
  const contains = `%${likeEscape(text)}%`;
  const where = `(lower(r.name) like lower(?) or to_tsvector('${SEARCH_CONFIG}', r.description) @@ ${TEXT_QUERY})
    and ${s.sql}`;
  const order = {
    sql: `case when lower(r.name) = lower(?) then 0 when lower(r.name) like lower(?) then 1
               when lower(r.name) like lower(?) then 2 else 3 end, lower(o.name), lower(r.name)`,
    params: [text, `${likeEscape(text)}%`, contains],
  };
  return pageWhere(db, where, [contains, text, ...s.params], order, limit, offset);
}

/**
 * Repositories of these organizations in `scope` (only `repoId` when given), by organization and
 * name; `visibility` keeps only public or only private ones.
 */
export function orgsReposPage(
  db: Db,
  orgIds: readonly number[],
  scope: RepoScope,
  filter: { repoId: number | null; visibility: 'public' | 'private' | undefined },
  limit: number,
  offset: number,
): Promise<{ rows: RepoWithOrg[]; total: number }> {
  const s = scopeSql(scope);
  const params: unknown[] = [intArray(orgIds), ...s.params];
  let where = `r.org_id = any(?::int[]) and ${s.sql}`;
  if (filter.repoId !== null) {
    where += ' and r.id = ?';
    params.push(filter.repoId);
  }
  if (filter.visibility !== undefined)
    where += ` and ${filter.visibility === 'private' ? '' : 'not '}r.is_private`;
  return pageWhere(db, where, params, { sql: 'lower(o.name), lower(r.name)', params: [] }, limit, offset);
}

/**
 * Repositories in `scope` (of `orgIds` only, when given), most recently changed first: their last
 * push, merge or tag (`repo_ref_states`), else their creation.
 */
export function recentPage(
  db: Db,
  scope: RepoScope,
  orgIds: readonly number[] | undefined,
  limit: number,
  offset: number,
): Promise<{ rows: (RepoWithOrg & { pushedAt: Date | string | null })[]; total: number }> {
  const s = scopeSql(scope);
  const params: unknown[] = [...s.params];
  let where = s.sql;
  if (orgIds !== undefined) {
    where += ' and r.org_id = any(?::int[])';
    params.push(intArray(orgIds));
  }
  return (async () => {
    const total = await count(db, `select count(*) as n from repos r where ${where}`, params);
    if (total <= offset) return { rows: [], total };
    const rows = await db.execute<(RepoWithOrg & { pushedAt: Date | string | null })[]>(
      `select ${WITH_ORG_NAME}, st.updated_at as "pushedAt"
         from repos r join orgs o on o.id = r.org_id left join repo_ref_states st on st.repo_id = r.id
        where ${where}
        order by coalesce(st.updated_at, r.created_at) desc, r.id desc limit ? offset ?`,
      [...params, limit, offset],
    );
    return { rows, total };
  })();
}

export function insertRepo(
  db: Db,
  r: Pick<RepoRow, 'orgId' | 'name' | 'description' | 'isPrivate' | 'vcs' | 'defaultBranch' | 'storageNode'>,
): Promise<RepoRow> {
  return one<RepoRow>(
    db,
    `insert into repos (org_id, name, description, is_private, vcs, default_branch, storage_node)
     values (?, ?, ?, ?, ?, ?, ?) returning ${REPO}`,
    [r.orgId, r.name, r.description, r.isPrivate, r.vcs, r.defaultBranch, r.storageNode],
  );
}

/** The storage node a repository's row names now (undefined: none, or no such repository). */
export async function storageNodeOf(db: Db, id: number): Promise<string | undefined> {
  const r = await first<{ node: string | null }>(db, 'select storage_node as node from repos where id = ?', [
    id,
  ]);
  return r?.node ?? undefined;
}

/** Names another node for a repository (a move, once its copy there was verified). */
export async function setStorageNode(db: Db, id: number, node: string): Promise<void> {
  await db.execute('update repos set storage_node = ? where id = ?', [node, id]);
}

/** The repositories a node holds, by the rows (a restore's list). */
export function reposOnNode(db: Db, node: string): Promise<{ id: number; vcs: VcsKind }[]> {
  return db.execute('select id, vcs from repos where storage_node = ? order by id', [node]);
}

/** Sets what is given (undefined keeps the value) and `updated_at`. */
export function updateRepo(
  db: Db,
  id: number,
  set: { description?: string | undefined; isPrivate?: boolean | undefined },
): Promise<RepoRow | undefined> {
  return first<RepoRow>(
    db,
    `update repos set description = coalesce(?, description), is_private = coalesce(?, is_private),
       updated_at = now() where id = ? returning ${REPO}`,
    [set.description ?? null, set.isPrivate ?? null, id],
  );
}

/** Deletes the row; every row of the repository's features goes with it (foreign-key cascades). */
export async function deleteRepo(db: Db, id: number): Promise<void> {
  await db.execute('delete from repos where id = ?', [id]);
}

// ----- changes: the push lock and the recorded ref state (see changes.ts) -------------------------

/** The lock class of a repository's push lock (any constant every Triad process shares; push-locks.ts). */
export const PUSH_LOCK = 0x70757368; // "push"

/**
 * Whether backend `pid` still holds repository `repoId`'s push lock, asked on any connection (a
 * lock connection lost mid-change has released it: another replica may hold it now).
 */
export async function pushLockHeld(db: Db, repoId: number, pid: number): Promise<boolean> {
  const row = await first<{ held: boolean }>(
    db,
    `select exists (select 1 from pg_locks where locktype = 'advisory' and classid = ? and objid = ?
       and objsubid = 2 and pid = ? and granted) as held`,
    [PUSH_LOCK, repoId, pid],
  );
  return row?.held === true;
}

/** A ref snapshot as `repo_ref_states` stores it (JSON). */
export type SnapshotJson = {
  tip: string;
  branches: [string, string][];
  bookmarks: [string, string][];
  tags: [string, string][];
  mark: number;
};

/** The ref state last recorded for the repository (undefined before its first change). */
export async function refState(tx: Db, repoId: number): Promise<SnapshotJson | undefined> {
  const row = await first<{ state: SnapshotJson }>(
    tx,
    'select state from repo_ref_states where repo_id = ?',
    [repoId],
  );
  return row?.state;
}

export async function saveRefState(tx: Db, repoId: number, state: SnapshotJson): Promise<void> {
  await tx.execute(
    `insert into repo_ref_states (repo_id, state) values (?, ?::jsonb)
       on conflict (repo_id) do update set state = excluded.state, updated_at = now()`,
    [repoId, JSON.stringify(state)],
  );
}
