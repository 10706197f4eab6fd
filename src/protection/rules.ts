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

const cache = new Map<string, RegExp>();

/** The pattern as an anchored regular expression. */
export function patternRegex(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (re === undefined) {
    const body = pattern
      .split(/(\*\*|\*)/)
      .map((part) =>
        part === '**' ? '.*' : part === '*' ? '[^/]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('');
    re = new RegExp(`^${body}$`, 's');
    if (cache.size > 1000) cache.clear();
    cache.set(pattern, re);
  }
  return re;
}

export function matches(pattern: string, name: string): boolean {
  return patternRegex(pattern).test(name);
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
