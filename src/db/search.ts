import { count, first, type Db } from './query.ts';

/**
 * Full-text search, as migration `0013-search` indexes it: the text search configuration, the
 * query a user's text becomes, and the two reads of a per-repository numbered table that carries
 * the generated `search` (title and body) and `search_title` columns (issues, pull requests).
 * Each feature calls these from its repository.ts with its own table.
 */

/** The configuration the generated columns use; a query must use the same one. */
export const SEARCH_CONFIG = 'english';

/**
 * The tsquery of a user's text, web-search style: words (all must match, by their stem),
 * `"a phrase"`, `or`, `-word`. Text of stop words or punctuation only matches nothing.
 */
export const TEXT_QUERY = `websearch_to_tsquery('${SEARCH_CONFIG}', ?)`;

/** The tables `textCount` and `textPage` read (each with the columns above). */
export type SearchTable = 'issues' | 'pulls';

/**
 * One match: its number and when it was created, in microseconds since 1970 as decimal text
 * (what the matches of several tables merge by, to PostgreSQL's precision).
 */
export type TextHit = { number: number; created_us: string };

/** How many rows of the repository match: `all` (title or body), or in the `title`. */
export async function textCount(
  db: Db,
  table: SearchTable,
  repoId: number,
  text: string,
  where: 'all' | 'title',
): Promise<number> {
  return count(
    db,
    `select count(*) as n from ${table} where repo_id = ? and ${where === 'all' ? 'search' : 'search_title'} @@ ${TEXT_QUERY}`,
    [repoId, text],
  );
}

/**
 * Below this many matches in a group, its page is read by sorting all of them: the planner
 * could otherwise walk the `(repo_id, number)` index, row after row, for matches that are rare
 * (it estimates each word's frequency, not how few rows both conditions of `rest` leave).
 */
const FEW = 1000;

/**
 * One page of the matches of one group, newest (highest number) first: `title` those matching
 * in the title, `rest` the others; `matches` is how many the group has, or at most has. The text
 * is a literal in the statement, so the planner sees how common its words are: a common one
 * walks `(repo_id, number)` backwards and stops at the page, fewer than `FEW` matches are read
 * through the GIN index and sorted.
 */
export function textPage(
  db: Db,
  table: SearchTable,
  repoId: number,
  text: string,
  group: 'title' | 'rest',
  matches: number,
  limit: number,
  offset: number,
): Promise<TextHit[]> {
  const match =
    group === 'title'
      ? `search_title @@ ${TEXT_QUERY}`
      : `search @@ ${TEXT_QUERY} and not (search_title @@ ${TEXT_QUERY})`;
  const texts = group === 'title' ? [text] : [text, text];
  // `number + 0` is no indexed order, so the planner reads the matches from the GIN index
  const order = matches < FEW ? 'number + 0 desc' : 'number desc';
  return db.execute<TextHit[]>(
    `select number, (extract(epoch from created_at) * 1000000)::bigint::text as created_us
       from ${table} where repo_id = ? and ${match} order by ${order} limit ? offset ?`,
    [repoId, ...texts, limit, offset],
  );
}

/** Full-text search of one table, on the entity manager of the moment (what the search feature asks). */
export type TextSource = {
  /** How many rows match: `all` (title or body), or in the `title`. */
  count(repoId: number, text: string, where: 'all' | 'title'): Promise<number>;
  /** A page of the matches of one group (`title` or the `rest`, of `matches`), newest first. */
  page(
    repoId: number,
    text: string,
    group: 'title' | 'rest',
    matches: number,
    limit: number,
    offset: number,
  ): Promise<TextHit[]>;
};

/** The repository's text version: raised whenever a title or body of its issues or pull requests changes. */
export async function textVersion(db: Db, repoId: number): Promise<string> {
  const row = await first<{ v: string }>(
    db,
    'select version::text as v from search_versions where repo_id = ?',
    [repoId],
  );
  return row?.v ?? '0';
}

/** Counts kept per source, the least recently used first out beyond this many. */
const KEPT_COUNTS = 2000;

/**
 * `textCount` and `textPage` of `table`, run on `em()`. A count is kept with the repository's
 * text version it was made at and answered again while the version stays (a page of a search
 * counts its matches, and a common word matches thousands of rows).
 */
export function textSource(table: SearchTable, em: () => Db): TextSource {
  const kept = new Map<string, { version: string; n: number }>();
  return {
    count: async (repoId, text, where) => {
      const db = em();
      const version = await textVersion(db, repoId);
      const key = `${repoId}\u0000${where}\u0000${text}`;
      const hit = kept.get(key);
      kept.delete(key);
      const n = hit?.version === version ? hit.n : await textCount(db, table, repoId, text, where);
      kept.set(key, { version, n });
      if (kept.size > KEPT_COUNTS) kept.delete(kept.keys().next().value!);
      return n;
    },
    page: (repoId, text, group, matches, limit, offset) =>
      textPage(em(), table, repoId, text, group, matches, limit, offset),
  };
}
