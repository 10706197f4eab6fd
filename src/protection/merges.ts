import { refusal, rulesFor, type Pusher, type RuleShape } from './rules.ts';

/**
 * Protected refs applied to a pull request's merge (DESIGN.md section 11: merges and
 * `delete_source` obey the rules a push obeys).
 *
 * Every merge style moves the target forward: a merge commit, a squashed commit or rebased
 * commits all descend from the target's head, so `fast_forward_only` never refuses a merge; what
 * can refuse it is who may push to the target.
 */
export function mergeRefusal(
  rules: readonly RuleShape[],
  type: 'branch' | 'bookmark',
  target: string,
  pusher: Pusher,
): string | undefined {
  for (const t of mergeTargets(type, target)) {
    const why = refusal(
      rules,
      { name: t.name, type: t.type, old: t.name, new: t.name, fastForward: true },
      pusher,
    );
    if (why !== undefined) return why;
  }
  return undefined;
}

/**
 * The refs a merge into `target` moves, as rules name them: the target, and for Mercurial's `@`
 * also the `default` named branch (a merge into `@` commits on it; without an `@` bookmark `@`
 * stands for its head), so a rule on `default` binds a merge into `@` as it binds a push.
 */
export function mergeTargets(
  type: 'branch' | 'bookmark',
  target: string,
): { name: string; type: 'branch' | 'bookmark' }[] {
  const out = [{ name: target, type }];
  if (type === 'bookmark' && target === '@') out.push({ name: 'default', type: 'branch' });
  return out;
}

/**
 * Why `delete_source` keeps the source ref, or undefined when it may go: a merge never deletes a
 * protected ref (DESIGN.md section 11), whatever its rule says of deletions by push. The merge
 * goes ahead either way (as for the default branch).
 */
export function sourceKeptBy(
  rules: readonly RuleShape[],
  type: 'branch' | 'bookmark',
  source: string,
  _pusher: Pusher,
): string | undefined {
  const rule = rulesFor(rules, source)[0];
  if (rule === undefined) return undefined;
  return `${type} ${source} is protected by rule "${rule.pattern}": a merge does not delete it`;
}
