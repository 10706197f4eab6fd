import { describe, expect, test } from '@jest/globals';
import { ScaleDownTimer, wantedReplicas } from '../../src/operator/scaling.ts';
import { specProblem, type AgentPool } from '../../src/operator/types.ts';

const limits = { capacity: 2, min: 1, max: 4 };

describe('operator scaling', () => {
  test('replicas are ceil((pending + running) / capacity), clamped to min and max', () => {
    expect(wantedReplicas({ pending: 0, running: 0 }, limits)).toBe(1);
    expect(wantedReplicas({ pending: 3, running: 0 }, limits)).toBe(2);
    expect(wantedReplicas({ pending: 2, running: 3 }, limits)).toBe(3);
    expect(wantedReplicas({ pending: 50, running: 0 }, limits)).toBe(4);
    expect(wantedReplicas({ pending: 0, running: 0 }, { ...limits, min: 0 })).toBe(0);
  });

  test('scale-up is immediate; scale-down waits for the whole delay and restarts it when work returns', () => {
    const t = new ScaleDownTimer();
    expect(t.decide('p', 3, 1, 10_000, 0)).toEqual({ replicas: 3 });
    expect(t.decide('p', 1, 3, 10_000, 1000)).toEqual({ replicas: 3, recheckInMs: 10_000, downAt: 11_000 });
    expect(t.decide('p', 1, 3, 10_000, 6000)).toEqual({ replicas: 3, recheckInMs: 5000, downAt: 11_000 });
    // the work came back: the delay starts over
    expect(t.decide('p', 3, 3, 10_000, 7000)).toEqual({ replicas: 3 });
    expect(t.decide('p', 2, 3, 10_000, 8000)).toEqual({ replicas: 3, recheckInMs: 10_000, downAt: 18_000 });
    expect(t.decide('p', 2, 3, 10_000, 18_000)).toEqual({ replicas: 2 });
    expect(t.decide('q', 0, 2, 0, 0)).toEqual({ replicas: 0 });
  });

  test('a spec the schema let in but that cannot run is named', () => {
    const pool = (spec: object) => ({ metadata: { name: 'p' }, spec: { image: 'i', ...spec } }) as AgentPool;
    expect(specProblem(pool({ minReplicas: 3, maxReplicas: 1 }))).toBe(
      'maxReplicas (1) is less than minReplicas (3)',
    );
    expect(specProblem(pool({ capacity: 0 }))).toBe('capacity must be at least 1');
    expect(specProblem(pool({}))).toBeUndefined();
  });
});
