import { describe, expect, test } from '@jest/globals';
import { deployment } from '../../src/operator/resources.ts';
import type { AgentPool } from '../../src/operator/types.ts';

const pool = (steps: object) =>
  ({ metadata: { name: 'p', namespace: 'ci', uid: 'u' }, spec: { image: 'triad:1', steps } }) as AgentPool;
const envOf = (p: AgentPool) =>
  Object.fromEntries(
    (deployment(p, 1, 'http://triad:3000').spec!.template.spec!.containers[0]!.env ?? []).map((e) => [
      e.name,
      e.value,
    ]),
  );

describe("an AgentPool's step maximum reaches its agents", () => {
  test('spec.steps.maxResources and ephemeralStorage become the agent variables, integers as text', () => {
    const env = envOf(pool({ maxResources: { cpu: 2, memory: '4Gi' }, ephemeralStorage: '1Gi' }));
    expect(env).toMatchObject({
      TRIAD_AGENT_MAX_CPU: '2',
      TRIAD_AGENT_MAX_MEMORY: '4Gi',
      TRIAD_AGENT_EPHEMERAL_STORAGE: '1Gi',
    });
  });

  test('a pool without them sets none (steps are unbounded, no ephemeral-storage request)', () => {
    const env = envOf(pool({ maxResources: { memory: '1Gi' } }));
    expect(env.TRIAD_AGENT_MAX_MEMORY).toBe('1Gi');
    expect(Object.keys(env)).not.toContain('TRIAD_AGENT_MAX_CPU');
    expect(Object.keys(envOf(pool({}))).filter((k) => /^TRIAD_AGENT_(MAX_|EPHEMERAL)/.test(k))).toEqual([]);
  });
});
