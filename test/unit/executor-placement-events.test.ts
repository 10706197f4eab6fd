/**
 * Pure parts of the kubernetes executor: where later step pods go (placement.ts) and what a
 * waiting pod's Events say in the step log and to the pending timer (pending-events.ts).
 */
import { describe, expect, test } from '@jest/globals';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import {
  SCALE_UP_PAUSE_MS,
  eventLines,
  eventTime,
  pendingPause,
} from '../../agent/executors/pending-events.ts';
import { followsFirstNode, pinToNode, placeStep } from '../../agent/executors/placement.ts';

const pod = (spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod => ({
  metadata: { name: 'triad-p1-s2-abc' },
  spec: { containers: [{ name: 'step', image: 'alpine' }], ...spec },
});
const pin = { key: 'metadata.name', operator: 'In', values: ['node-a'] };

describe('placement of later step pods', () => {
  test('when the workspace is ReadWriteOnce or ReadWriteOncePod, then later steps follow the first node; ReadWriteMany does not', () => {
    expect(followsFirstNode('ReadWriteOnce')).toBe(true);
    expect(followsFirstNode('ReadWriteOncePod')).toBe(true);
    expect(followsFirstNode('ReadWriteMany')).toBe(false);
    const p = pod();
    expect(placeStep(p, 'node-a', 'ReadWriteMany')).toBe(p);
    expect(placeStep(p, undefined, 'ReadWriteOnce')).toBe(p);
    expect(
      placeStep(p, 'node-a', 'ReadWriteOnce').spec?.affinity?.nodeAffinity
        ?.requiredDuringSchedulingIgnoredDuringExecution,
    ).toEqual({ nodeSelectorTerms: [{ matchFields: [pin] }] });
  });

  test('when the pod has its own required terms and other affinities, then the pin is added to each term and the rest is kept', () => {
    const zone = { key: 'topology.kubernetes.io/zone', operator: 'In', values: ['z1'] };
    const arch = { key: 'kubernetes.io/arch', operator: 'In', values: ['arm64'] };
    const preferred = [{ weight: 1, preference: { matchExpressions: [zone] } }];
    const podAffinity = { preferredDuringSchedulingIgnoredDuringExecution: [] };
    const p = pod({
      nodeSelector: { pool: 'ci' },
      affinity: {
        podAffinity,
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [zone] }, { matchExpressions: [arch], matchFields: [] }],
          },
          preferredDuringSchedulingIgnoredDuringExecution: preferred,
        },
      },
    });
    const before = JSON.stringify(p);
    const pinned = pinToNode(p, 'node-a');
    expect(pinned.spec?.affinity).toEqual({
      podAffinity,
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [zone], matchFields: [pin] },
            { matchExpressions: [arch], matchFields: [pin] },
          ],
        },
        preferredDuringSchedulingIgnoredDuringExecution: preferred,
      },
    });
    expect(pinned.spec?.nodeSelector).toEqual({ pool: 'ci' });
    expect(JSON.stringify(p)).toBe(before);
  });
});

let uid = 0;
function ev(reason: string, message: string, at: number): CoreV1Event {
  uid += 1;
  return {
    metadata: { uid: String(uid) },
    involvedObject: { kind: 'Pod', name: 'p' },
    reason,
    message,
    lastTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, at)),
  };
}

describe('Events of a waiting pod', () => {
  test('when events repeat or are of no interest, then each reason and message is said once, oldest first', () => {
    const said = new Set<string>();
    const sched = '0/2 nodes are available: 2 node(s) didn’t match Pod’s node affinity/selector.';
    const events = [
      ev('FailedScheduling', sched, 5),
      ev('Scheduled', 'Successfully assigned', 1),
      ev('TriggeredScaleUp', 'pod triggered scale-up: [{pool 1->2 (max: 5)}]', 3),
      ev('FailedScheduling', sched, 7),
    ];
    expect(eventLines(events, said)).toEqual([
      '[triad] TriggeredScaleUp: pod triggered scale-up: [{pool 1->2 (max: 5)}]\n',
      `[triad] FailedScheduling: ${sched}\n`,
    ]);
    const more = [...events, ev('FailedAttachVolume', 'Multi-Attach error for volume "pvc-1"', 9)];
    expect(eventLines(more, said)).toEqual([
      '[triad] FailedAttachVolume: Multi-Attach error for volume "pvc-1"\n',
    ]);
    expect(eventLines(more, said)).toEqual([]);
    // once the pod has a node, what the scheduler said before is moot; the rest is still said
    const later = [
      ev('FailedScheduling', 'pod has unbound immediate PersistentVolumeClaims', 1),
      ev('Pulling', 'Pulling image "a"', 2),
    ];
    expect(eventLines(later, new Set(), true)).toEqual(['[triad] Pulling: Pulling image "a"\n']);
  });

  test('when an image is being pulled, then the timer stands still until it is pulled or fails', () => {
    const pulling = ev('Pulling', 'Pulling image "big:1"', 10);
    expect(pendingPause([])).toBeUndefined();
    expect(pendingPause([pulling])).toBe('pulling');
    expect(
      pendingPause([pulling, ev('Pulled', 'Successfully pulled image "big:1" in 9s', 19)]),
    ).toBeUndefined();
    expect(
      pendingPause([pulling, ev('Failed', 'Failed to pull image "big:1": not found', 12)]),
    ).toBeUndefined();
    expect(pendingPause([pulling, ev('BackOff', 'Back-off pulling image "big:1"', 30)])).toBeUndefined();
    // a retry after a back-off pulls again
    expect(
      pendingPause([
        pulling,
        ev('BackOff', 'Back-off pulling image "big:1"', 30),
        ev('Pulling', 'Pulling image "big:1"', 40),
      ]),
    ).toBe('pulling');
    // another image still pulling; a start and an end in the same second is an end
    expect(
      pendingPause([pulling, ev('Pulled', 'Container image "clone:1" already present on machine', 11)]),
    ).toBe('pulling');
    expect(pendingPause([ev('Pulled', 'Successfully pulled image "big:1"', 10), pulling])).toBeUndefined();
  });

  test('when the autoscaler triggered a scale-up, then the timer stands still', () => {
    expect(pendingPause([ev('NotTriggerScaleUp', "pod didn't trigger scale-up", 1)])).toBeUndefined();
    const scaleUp = ev('TriggeredScaleUp', 'pod triggered scale-up', 1);
    expect(pendingPause([scaleUp], eventTime(scaleUp) + 5000)).toBe('scale-up');
  });

  test('when a scale-up is followed by a refusal, or is older than the autoscaler gives a new node, then the timer runs again', () => {
    const triggered = ev('TriggeredScaleUp', 'pod triggered scale-up', 1);
    expect(
      pendingPause([triggered, ev('NotTriggerScaleUp', "pod didn't trigger scale-up", 2)]),
    ).toBeUndefined();
    const at = eventTime(triggered);
    expect(pendingPause([triggered], at + SCALE_UP_PAUSE_MS - 1000)).toBe('scale-up');
    expect(pendingPause([triggered], at + SCALE_UP_PAUSE_MS)).toBeUndefined();
  });
});
