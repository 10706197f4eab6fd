import type { TestServer } from './server.ts';
import { insertRule, type RuleFields } from '../../src/protection/repository.ts';
import type { ProtectionRule } from '../../src/protection/rules.ts';

/**
 * A protection rule written straight into a test server's database (`insertRule`), for the
 * commit status tests: what a merge into `pattern` waits for. Defaults: members push, no
 * fast-forward-only, deletion refused, no required checks.
 */
export function statusRule(
  s: TestServer,
  repoId: number,
  fields: Partial<RuleFields> & { pattern: string },
): Promise<ProtectionRule> {
  const em = s.running.orm.em.fork();
  return insertRule(em, repoId, {
    fast_forward_only: false,
    allow_deletion: false,
    push: 'members',
    require_pipeline: false,
    required_contexts: [],
    ...fields,
  });
}
