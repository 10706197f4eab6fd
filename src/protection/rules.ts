/**
 * Protected refs: the rules of a repository and what they refuse. Pure functions, shared by the
 * push path of each kind (Git's pre-receive check, Mercurial's transaction hook, Fossil's check of
 * received artifacts), by merges and `delete_source`, and by the API.
 *
 * A pattern is matched against a branch or bookmark name (`@` is Mercurial's mainline bookmark):
 * `*` matches any characters within one `/`-separated segment, `**` any characters across
 * segments; every other character stands for itself.
 */

/** Who may move a protected ref: org owners, every org member, or the users named. */
export type PushAllow = 'owners' | 'members' | { users: string[] };

export type ProtectionRule = {
  id: number;
  pattern: string;
  fast_forward_only: boolean;
  allow_deletion: boolean;
  push: PushAllow;
  require_pipeline: boolean;
  required_contexts: string[];
  created_at: string;
};

/** What a rule needs to judge a push (the stored record without its bookkeeping). */
export type RuleShape = Pick<ProtectionRule, 'pattern' | 'fast_forward_only' | 'allow_deletion' | 'push'>;

/** One ref a push, merge or deletion moves; `old`/`new` null: created / deleted. */
export type RefUpdate = {
  name: string;
  type: 'branch' | 'bookmark' | 'tag';
  old: string | null;
  new: string | null;
  /** The new head descends from the old one (true for creations and deletions). */
  fastForward: boolean;
};

/** Who pushes: the authenticated user and their role in the repository's organization. */
export type Pusher = { username: string; role: 'owner' | 'member' | undefined };

/**
 * What a push's backend run needs to judge it (`BackendRequest.protection`): the repository's
 * rules and who pushes. Absent when the repository has no rules (nothing to check).
 */
export type Protection = { rules: RuleShape[]; pusher: Pusher };

/** A pattern as tokens: a literal character, `*` (within a segment) or `**` (across segments). */
type Token = string | 1 | 2;

const cache = new Map<string, Token[]>();

function tokens(pattern: string): Token[] {
  let t = cache.get(pattern);
  if (t === undefined) {
    t = [];
    for (const part of pattern.split(/(\*+)/)) {
      if (part === '') continue;
      // a run of stars is one wildcard: `**` (or longer) crosses segments
      if (part.startsWith('*')) t.push(part.length >= 2 ? 2 : 1);
      else t.push(...part);
    }
    if (cache.size > 1000) cache.clear();
    cache.set(pattern, t);
  }
  return t;
}

/** The positions reachable from `at` by skipping wildcards (which may match nothing). */
function closure(t: readonly Token[], at: Iterable<number>): Set<number> {
  const out = new Set<number>();
  for (let i of at) {
    out.add(i);
    while (i < t.length && typeof t[i] === 'number') out.add(++i);
  }
  return out;
}

/**
 * Whether `name` matches `pattern`, in time proportional to their lengths' product whatever the
 * pattern (a backtracking regular expression could take exponential time on a hostile one): the
 * set of pattern positions reached so far advances one character of the name at a time.
 */
export function matches(pattern: string, name: string): boolean {
  const t = tokens(pattern);
  let at = closure(t, [0]);
  for (const c of name) {
    const next: number[] = [];
    for (const i of at) {
      const tok = t[i];
      if (tok === undefined) continue;
      if (tok === 2 || (tok === 1 && c !== '/')) next.push(i);
      else if (tok === c) next.push(i + 1);
    }
    if (next.length === 0) return false;
    at = closure(t, next);
  }
  return at.has(t.length);
}

/** The rules whose pattern matches a branch or bookmark name (every one of them applies). */
export function rulesFor<R extends Pick<ProtectionRule, 'pattern'>>(rules: readonly R[], name: string): R[] {
  return rules.filter((r) => matches(r.pattern, name));
}

/** Whether `pusher` may move refs under `rule`. */
export function mayPush(rule: Pick<ProtectionRule, 'push'>, pusher: Pusher): boolean {
  if (rule.push === 'owners') return pusher.role === 'owner';
  if (rule.push === 'members') return pusher.role === 'owner' || pusher.role === 'member';
  return rule.push.users.includes(pusher.username);
}

function who(push: PushAllow): string {
  if (push === 'owners') return 'only organization owners may push to it';
  if (push === 'members') return 'only organization members may push to it';
  return `only ${push.users.length === 0 ? 'nobody' : push.users.join(', ')} may push to it`;
}

/**
 * Why the rules refuse `update` by `pusher`, or undefined when they allow it. The message names
 * the rule's pattern and the reason; a VCS client prints it to the person pushing. Tags are not
 * protected by these rules.
 */
export function refusal(rules: readonly RuleShape[], update: RefUpdate, pusher: Pusher): string | undefined {
  if (update.type === 'tag') return undefined;
  for (const rule of rulesFor(rules, update.name)) {
    const what = `${update.type} ${update.name} is protected by rule "${rule.pattern}"`;
    if (!mayPush(rule, pusher)) return `${what}: ${who(rule.push)}`;
    if (update.new === null && !rule.allow_deletion) return `${what}: it cannot be deleted`;
    if (update.old !== null && update.new !== null && rule.fast_forward_only && !update.fastForward)
      return `${what}: only fast-forward updates are allowed (this would rewrite its history)`;
  }
  return undefined;
}

/** The first refusal among several updates (one push moving several refs), or undefined. */
export function firstRefusal(
  rules: readonly RuleShape[],
  updates: readonly RefUpdate[],
  pusher: Pusher,
): string | undefined {
  if (rules.length === 0) return undefined;
  for (const u of updates) {
    const why = refusal(rules, u, pusher);
    if (why !== undefined) return why;
  }
  return undefined;
}
