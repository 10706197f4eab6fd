import { describe, expect, test } from '@jest/globals';
import { busyInstances, wantedReplicas } from '../../src/operator/scaling.ts';
import { isLeftover } from '../../src/operator/sweeper.ts';
import type { RegisteredAgent } from '../../src/operator/triad-api.ts';
import { specProblem, type AgentPool } from '../../src/operator/types.ts';

const instance = (name: string, running: number[] = [], live = true) => ({
  name,
  labels: {},
  live,
  running_pipelines: running,
});
const agent = (instances: ReturnType<typeof instance>[]): RegisteredAgent => ({
  id: 1,
  name: 'agentpool:team-a/default:uid-a',
  instances,
  running_pipelines: instances.flatMap((i) => i.running_pipelines),
});
const NOW = Date.parse('2026-01-01T00:10:00Z');
const step = (agentLabel: string, pipeline: number, created = '2026-01-01T00:00:00Z') => ({
  name: `triad-p${pipeline}-s1`,
  creationTimestamp: new Date(created),
  labels: {
    'app.kubernetes.io/managed-by': 'triad-agent',
    'triad.dev/pipeline': String(pipeline),
    'triad.dev/agent': agentLabel,
  },
});

describe('operator sweeper ownership', () => {
  const mine = agent([instance('default-agent-7d9f-abcde', [5]), instance('default-agent-7d9f-xyzzy')]);

  test("a finished pipeline of one of the agent's own instances is a leftover once past the grace", () => {
    expect(isLeftover(step('default-agent-7d9f-xyzzy', 4), mine, 120_000, NOW)).toBe(true);
    // its pipeline still runs, or it is younger than the grace
    expect(isLeftover(step('default-agent-7d9f-abcde', 5), mine, 120_000, NOW)).toBe(false);
    expect(isLeftover(step('default-agent-7d9f-xyzzy', 4, '2026-01-01T00:09:30Z'), mine, 120_000, NOW)).toBe(
      false,
    );
  });

  test("step objects of another pool are never the pool's, whatever their names start with", () => {
    // a pool of the same name in another namespace sharing the step namespace
    expect(isLeftover(step('default-agent-5c6b-qwert', 9), mine, 120_000, NOW)).toBe(false);
    // a pool named `default-agent-x`
    expect(isLeftover(step('default-agent-x-agent-5c6b-qwert', 9), mine, 120_000, NOW)).toBe(false);
    expect(isLeftover({ name: 'x', labels: { 'triad.dev/pipeline': '9' } }, mine, 0, NOW)).toBe(false);
  });

  test('a pool whose agent names are longer than a label value has its leftovers swept', () => {
    const long = `${'p'.repeat(60)}-agent-7d9f8b6c5d-abcde`;
    const a = agent([instance(long)]);
    expect(isLeftover(step(long.slice(0, 63), 3), a, 0, NOW)).toBe(true);
  });
});

describe('operator scaling floor', () => {
  test('with capacity 2 and one pipeline left on each of 3 agents, the pool keeps 3 agents', () => {
    const a = agent([instance('a', [1]), instance('b', [2]), instance('c', [3]), instance('d', [], true)]);
    expect(busyInstances(a)).toBe(3);
    const limits = { capacity: 2, min: 0, max: 5 };
    expect(wantedReplicas({ pending: 0, running: 3 }, limits, busyInstances(a))).toBe(3);
    // a dead instance does not hold the pool up; max still caps
    expect(busyInstances(agent([instance('a', [1], false), instance('b', [2])]))).toBe(1);
    expect(wantedReplicas({ pending: 0, running: 3 }, { ...limits, max: 2 }, 3)).toBe(2);
  });
});

describe('operator spec rules', () => {
  const pool = (spec: object, namespace = 'team-a') =>
    ({ metadata: { name: 'p', namespace }, spec: { image: 'i', ...spec } }) as AgentPool;

  test('invalid pool labels and pod labels are named', () => {
    expect(specProblem(pool({ labels: { pool: 'a b' } }))).toBe('labels: invalid value "a b" of label pool');
    expect(specProblem(pool({ labels: { 'bad key': 'x' } }))).toBe('labels: invalid label key "bad key"');
    expect(specProblem(pool({ labels: { pool: 3 } }))).toBe('labels: invalid value 3 of label pool');
    expect(specProblem(pool({ podLabels: { team: '-x' } }))).toBe(
      'podLabels: invalid value "-x" of label team',
    );
    const many = Object.fromEntries([...Array(17).keys()].map((i) => [`k${i}`, 'v']));
    expect(specProblem(pool({ labels: many }))).toBe('labels has more than 16 labels');
    expect(specProblem(pool({ labels: { pool: 'gpu', 'triad.dev/os': '' } }))).toBeUndefined();
  });

  test("a step namespace other than the pool's own must be allowed", () => {
    expect(specProblem(pool({ steps: { namespace: 'team-a' } }))).toBeUndefined();
    expect(specProblem(pool({ steps: { namespace: 'kube-system' } }))).toMatch(
      /^steps.namespace "kube-system" is not allowed: the operator runs steps only in the pool's own namespace \(TRIAD_OPERATOR_STEP_NAMESPACES\)$/,
    );
    expect(specProblem(pool({ steps: { namespace: 'kube-system' } }), ['ci'])).toMatch(/or in ci/);
    expect(specProblem(pool({ steps: { namespace: 'ci' } }), ['ci'])).toBeUndefined();
    expect(specProblem(pool({ steps: { namespace: 'anything' } }), ['*'])).toBeUndefined();
  });
});
