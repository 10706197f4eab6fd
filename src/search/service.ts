import type { RepoTarget } from '../domain/repo.ts';
import type { TextHit } from '../db/search.ts';
import { offsetOf, type Page } from '../http/pagination.ts';
import type { IssuesService } from '../issues/service.ts';
import type { PullsService } from '../pulls/service.ts';
import { issueHit, pullHit, type SearchHitJson, type SearchIssuesQuery, type SearchKind } from './schemas.ts';

type Group = 'title' | 'rest';

/** What search asks a feature with full-text searchable, numbered records (issues, pull requests). */
type SearchSource = {
  searchCounts(repoId: number, text: string): Promise<{ title: number; total: number }>;
  searchPage(
    repoId: number,
    text: string,
    group: Group,
    matches: number,
    limit: number,
    offset: number,
  ): Promise<TextHit[]>;
};

type Counted = { kind: SearchKind; counts: { title: number; total: number } };
type Found = { kind: SearchKind; hit: TextHit };

/**
 * Searching the issues and pull requests of a repository. Matches in the title come first, then
 * the others (a word in the body, or words split between title and body); within each group the
 * newest first. With both kinds, each group merges the two tables by creation time.
 */
export class SearchService {
  private readonly sources: Record<SearchKind, SearchSource>;
  private readonly issues: Pick<IssuesService['reads'], 'byNumbers'>;
  private readonly pulls: Pick<PullsService['reads'], 'byNumbers'>;

  constructor(deps: {
    issues: Pick<IssuesService['reads'], 'searchCounts' | 'searchPage' | 'byNumbers'>;
    pulls: Pick<PullsService['reads'], 'searchCounts' | 'searchPage' | 'byNumbers'>;
  }) {
    this.sources = { issue: deps.issues, pull: deps.pulls };
    this.issues = deps.issues;
    this.pulls = deps.pulls;
  }

  /** One page of the issues and pull requests (or one kind) matching `q.q`. */
  async search(t: RepoTarget, q: SearchIssuesQuery): Promise<Page<SearchHitJson>> {
    const kinds: SearchKind[] = q.kind === undefined ? ['issue', 'pull'] : [q.kind];
    const counted: Counted[] = [];
    for (const kind of kinds) {
      counted.push({ kind, counts: await this.sources[kind].searchCounts(t.repo.id, q.q) });
    }
    const inTitle = counted.reduce((n, c) => n + c.counts.title, 0);
    const total = counted.reduce((n, c) => n + c.counts.total, 0);
    const page = { total, page: q.page, perPage: q.per_page };
    const offset = offsetOf(q);
    if (offset >= total) return { ...page, items: [] };
    const first =
      offset < inTitle
        ? await this.window(t, q.q, 'title', counted, offset, Math.min(q.per_page, inTitle - offset))
        : [];
    const rest = await this.window(
      t,
      q.q,
      'rest',
      counted,
      Math.max(0, offset - inTitle),
      q.per_page - first.length,
    );
    return { ...page, items: await this.items(t, [...first, ...rest]) };
  }

  /**
   * Matches `start` to `start + n` of one group. One kind: that page of its table. Both: the
   * first `start + n` of each table, merged (newest first): the first m of a merge depend only
   * on the first m of each list, so consecutive pages neither repeat nor skip a match.
   */
  private async window(
    t: RepoTarget,
    text: string,
    group: Group,
    counted: readonly Counted[],
    start: number,
    n: number,
  ): Promise<Found[]> {
    if (n <= 0) return [];
    const size = (c: Counted) => (group === 'title' ? c.counts.title : c.counts.total - c.counts.title);
    const present = counted.filter((c) => size(c) > 0);
    const read = async (c: Counted, limit: number, offset: number): Promise<Found[]> => {
      const hits = await this.sources[c.kind].searchPage(t.repo.id, text, group, size(c), limit, offset);
      return hits.map((hit) => ({ kind: c.kind, hit }));
    };
    if (present.length === 1) return read(present[0]!, n, start);
    const lists: Found[][] = [];
    for (const c of present) lists.push(await read(c, start + n, 0));
    return merge(lists).slice(start, start + n);
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
