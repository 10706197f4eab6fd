import { refusal, type Pusher, type RuleShape } from './rules.ts';

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
  return refusal(rules, { name: target, type, old: target, new: target, fastForward: true }, pusher);
}

/**
 * Why `delete_source` keeps the source ref, or undefined when the rules let the merging user
 * delete it: a rule that does not allow deletion, or does not let them push to it. The merge goes
 * ahead either way (as for the default branch).
 */
export function sourceKeptBy(
  rules: readonly RuleShape[],
  type: 'branch' | 'bookmark',
  source: string,
  pusher: Pusher,
): string | undefined {
  return refusal(rules, { name: source, type, old: source, new: null, fastForward: true }, pusher);
}
