import type { RepoTarget } from '../domain/repo.ts';
import type { TextHit, TextSource } from '../db/search.ts';
import { offsetOf, type Page } from '../http/pagination.ts';
import type { IssuesService } from '../issues/service.ts';
import type { PullsService } from '../pulls/service.ts';
import { issueHit, pullHit, type SearchHitJson, type SearchIssuesQuery, type SearchKind } from './schemas.ts';

type Group = 'title' | 'rest';

/** A kind searched: how many of it match (`total`), and how many in the title, once known. */
type Counted = { kind: SearchKind; total: number; title?: number };
type Found = { kind: SearchKind; hit: TextHit };

/**
 * Searching the issues and pull requests of a repository. Matches in the title come first, then
 * the others (a word in the body, or words split between title and body); within each group the
 * newest first. With both kinds, each group merges the two tables by creation time.
 *
 * Counting the matches is the costly part (it visits every matching row), so the title matches
 * are counted only when the page does not tell how many there are (a page past them).
 */
export class SearchService {
  private readonly sources: Record<SearchKind, TextSource>;
  private readonly issues: Pick<IssuesService['reads'], 'byNumbers'>;
  private readonly pulls: Pick<PullsService['reads'], 'byNumbers'>;

  constructor(deps: {
    issues: Pick<IssuesService['reads'], 'search' | 'byNumbers'>;
    pulls: Pick<PullsService['reads'], 'search' | 'byNumbers'>;
  }) {
    this.sources = { issue: deps.issues.search, pull: deps.pulls.search };
    this.issues = deps.issues;
    this.pulls = deps.pulls;
  }

  /** One page of the issues and pull requests (or one kind) matching `q.q`. */
  async search(t: RepoTarget, q: SearchIssuesQuery): Promise<Page<SearchHitJson>> {
    const kinds: SearchKind[] = q.kind === undefined ? ['issue', 'pull'] : [q.kind];
    const counted: Counted[] = [];
    for (const kind of kinds) {
      const total = await this.sources[kind].count(t.repo.id, q.q, 'all');
      if (total > 0) counted.push({ kind, total });
    }
    const total = counted.reduce((n, c) => n + c.total, 0);
    const page = { total, page: q.page, perPage: q.per_page };
    const offset = offsetOf(q);
    if (offset >= total) return { ...page, items: [] };
    const first = await this.titles(t, q.q, counted, offset, q.per_page);
    if (first.length === q.per_page) return { ...page, items: await this.items(t, first) };
    // the page goes past the title matches: each kind's `title` is known now
    const inTitle = counted.reduce((n, c) => n + (c.title ?? 0), 0);
    const restStart = offset + first.length - inTitle;
    const rest = await this.window(t, q.q, 'rest', counted, restStart, q.per_page - first.length);
    return { ...page, items: await this.items(t, [...first, ...rest.found]) };
  }

  /**
   * Title matches `start` to `start + n`. When fewer come back, the page goes past them, and each
   * kind's `title` count is set: from what was read when that tells it, else counted.
   */
  private async titles(
    t: RepoTarget,
    text: string,
    counted: Counted[],
    start: number,
    n: number,
  ): Promise<Found[]> {
    const { found, read } = await this.window(t, text, 'title', counted, start, n);
    if (found.length === n) return found;
    if (counted.length > 1) {
      // each list was read from its first match, `start + n` long: shorter, it was all of them
      for (const c of counted) c.title = read.get(c.kind) ?? 0;
      return found;
    }
    const only = counted[0]!;
    // read from `start`: the title matches end within the page, unless none was there at all
    only.title =
      found.length > 0 || start === 0
        ? start + found.length
        : await this.sources[only.kind].count(t.repo.id, text, 'title');
    return found;
  }

  /**
   * Matches `start` to `start + n` of one group, and how many rows of each kind were read. One
   * kind: that page of its table. Several: the first `start + n` of each table, merged (newest
   * first): the first m of a merge depend only on the first m of each list, so consecutive pages
   * neither repeat nor skip a match.
   */
  private async window(
    t: RepoTarget,
    text: string,
    group: Group,
    counted: readonly Counted[],
    start: number,
    n: number,
  ): Promise<{ found: Found[]; read: Map<SearchKind, number> }> {
    // a group's size: the rest's is known when it is read; the title's is at most the total
    const size = (c: Counted) => (group === 'title' ? (c.title ?? c.total) : c.total - (c.title ?? 0));
    const present = counted.filter((c) => size(c) > 0);
    const read = new Map<SearchKind, number>();
    if (n <= 0 || present.length === 0) return { found: [], read };
    const page = async (c: Counted, limit: number, offset: number): Promise<Found[]> => {
      const hits = await this.sources[c.kind].page(t.repo.id, text, group, size(c), limit, offset);
      read.set(c.kind, hits.length);
      return hits.map((hit) => ({ kind: c.kind, hit }));
    };
    if (present.length === 1) return { found: await page(present[0]!, n, start), read };
    const lists: Found[][] = [];
    for (const c of present) lists.push(await page(c, start + n, 0));
    return { found: merge(lists).slice(start, start + n), read };
  }

  /** The records of the matches, in their order, as their lists show them, with `kind`. */
  private async items(t: RepoTarget, found: readonly Found[]): Promise<SearchHitJson[]> {
    const numbers = (kind: SearchKind) => found.filter((f) => f.kind === kind).map((f) => f.hit.number);
    const issueNumbers = numbers('issue');
    const pullNumbers = numbers('pull');
    const issues = issueNumbers.length === 0 ? [] : await this.issues.byNumbers(t, issueNumbers);
    const pulls = pullNumbers.length === 0 ? [] : await this.pulls.byNumbers(t, pullNumbers);
    const byKey = new Map<string, SearchHitJson>([
      ...issues.map((i): [string, SearchHitJson] => [`issue:${i.number}`, issueHit(i)]),
      ...pulls.map((p): [string, SearchHitJson] => [`pull:${p.number}`, pullHit(p)]),
    ]);
    // A match deleted between the search and the read is left out.
    return found.flatMap((f) => {
      const item = byKey.get(`${f.kind}:${f.hit.number}`);
      return item === undefined ? [] : [item];
    });
  }
}

/** Lists each newest first, merged newest first (ties: issues before pull requests, higher number first). */
function merge(lists: readonly Found[][]): Found[] {
  const out: Found[] = [];
  const at = lists.map(() => 0);
  for (;;) {
    let best = -1;
    for (let i = 0; i < lists.length; i++) {
      const f = lists[i]![at[i]!];
      if (f !== undefined && (best < 0 || newer(f, lists[best]![at[best]!]!))) best = i;
    }
    if (best < 0) return out;
    out.push(lists[best]![at[best]!]!);
    at[best]! += 1;
  }
}

function newer(a: Found, b: Found): boolean {
  const ta = BigInt(a.hit.created_us);
  const tb = BigInt(b.hit.created_us);
  if (ta !== tb) return ta > tb;
  if (a.kind !== b.kind) return a.kind === 'issue';
  return a.hit.number > b.hit.number;
}
