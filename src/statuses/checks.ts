import { rulesFor, type ProtectionRule } from '../protection/rules.ts';
import { PIPELINE_CONTEXT, type ChecksJson, type StatusRow } from './schemas.ts';

/** The rule fields that decide what a merge into a ref waits for. */
export type CheckRule = Pick<ProtectionRule, 'pattern' | 'require_pipeline' | 'required_contexts'>;

/**
 * The contexts the rules matching `targetRef` require, in rule order (`triad/pipeline` first).
 * A merge into Mercurial's `@` commits on the `default` branch: the rules on `default` count too.
 */
export function requiredContexts(rules: readonly CheckRule[], targetRef: string): string[] {
  const out = new Set<string>();
  const names = targetRef === '@' ? ['@', 'default'] : [targetRef];
  for (const r of rules.filter((x) => names.some((n) => rulesFor([x], n).length > 0))) {
    if (r.require_pipeline) out.add(PIPELINE_CONTEXT);
    for (const c of r.required_contexts) out.add(c);
  }
  return [...out];
}

type Latest = Pick<StatusRow, 'context' | 'state' | 'target_url'>;

/**
 * A pull request's `checks` from the latest statuses of its head commit: every required context
 * (those without a status yet are `pending`), then every other context reported, by name.
 */
export function checksOf(required: readonly string[], latest: readonly Latest[]): ChecksJson {
  const byContext = new Map(latest.map((s) => [s.context, s]));
  const others = latest
    .map((s) => s.context)
    .filter((c) => !required.includes(c))
    .sort();
  const contexts = [...required, ...others].map((context) => {
    const s = byContext.get(context);
    return { context, state: s?.state ?? 'pending', target_url: s?.target_url ?? null };
  });
  const states = contexts.map((c) => c.state);
  const state =
    contexts.length === 0
      ? 'none'
      : states.some((s) => s === 'failure' || s === 'error')
        ? 'failure'
        : states.includes('pending')
          ? 'pending'
          : 'success';
  return { state, contexts };
}

/** What blocks a merge: undefined when every required context succeeded. */
export function mergeBlock(
  required: readonly string[],
  latest: readonly Latest[],
): { code: 'checks_pending' | 'checks_failed'; message: string } | undefined {
  const byContext = new Map(latest.map((s) => [s.context, s.state]));
  const failed = required.filter((c) => ['failure', 'error'].includes(byContext.get(c) ?? ''));
  if (failed.length > 0) {
    return { code: 'checks_failed', message: `required checks failed: ${failed.join(', ')}` };
  }
  const waiting = required.filter((c) => byContext.get(c) !== 'success');
  if (waiting.length > 0) {
    return { code: 'checks_pending', message: `required checks have not passed yet: ${waiting.join(', ')}` };
  }
  return undefined;
}
