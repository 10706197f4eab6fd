import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { IdleCollector } from '../../src/telemetry/idle-gc.ts';

const log = pino({ level: 'silent' });
const heap = () => v8.getHeapStatistics().total_heap_size;
const MiB = 1024 * 1024;

/**
 * Makes V8 grow its heap: about 100 MB of short-lived objects, the last four rounds (some 40 MB)
 * answered still alive, so the heap has surely grown past the threshold (however V8 collected
 * meanwhile) until the caller lets go of them.
 */
function burst(): { i: number; s: string }[][] {
  const kept: { i: number; s: string }[][] = [];
  for (let round = 0; round < 12; round++) {
    const a: { i: number; s: string }[] = [];
    for (let i = 0; i < 150_000; i++) a.push({ i, s: `value ${i}` });
    kept.push(a);
    if (kept.length > 4) kept.shift();
  }
  return kept;
}

/**
 * A full collection first, so the collector's baseline is this worker's live heap: a jest worker
 * that ran other test files before may hold so much free heap that the burst fits in it.
 */
function compact(): void {
  v8.setFlagsFromString('--expose-gc');
  try {
    (vm.runInNewContext('gc') as (o?: { type?: 'major'; execution?: 'sync' }) => void)({
      type: 'major',
      execution: 'sync',
    });
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

/** `n` requests, as the HTTP server reports them. */
function requests(c: IdleCollector, n: number): void {
  for (let i = 0; i < n; i++) c.request();
}

describe('idle collection of a grown heap', () => {
  test('when the server was busy and then quiet for an interval, with a heap grown past the threshold, then one full collection gives the memory back', () => {
    compact();
    const c = new IdleCollector({ idleMs: 0, growthBytes: 16 * MiB, log });
    const box: { held?: unknown[] } = { held: burst() };
    requests(c, 500);
    c.tick(); // busy interval
    const grown = heap();
    expect(box.held?.length).toBe(4);
    box.held = undefined; // garbage now, still on the heap: nothing allocates before the check
    c.tick(); // quiet interval
    expect(c.collections).toBe(1);
    expect(heap()).toBeLessThan(grown);
    c.tick(); // still quiet: nothing more to do
    expect(c.collections).toBe(1);
  });

  test('when requests keep coming, then no collection pauses the server', () => {
    const c = new IdleCollector({ idleMs: 0, growthBytes: 0, log });
    for (let i = 0; i < 5; i++) {
      requests(c, 100);
      c.tick();
    }
    expect(c.collections).toBe(0);
  });

  test('when only a trickle of requests arrives (scrapes, probes), then the interval counts as quiet', () => {
    const c = new IdleCollector({ idleMs: 0, growthBytes: -Infinity, quietRequests: 5, log });
    requests(c, 6);
    c.tick();
    requests(c, 5);
    c.tick();
    expect(c.collections).toBe(1);
  });

  test('when the server was never busy, or the heap did not grow enough, then nothing is collected', () => {
    const idle = new IdleCollector({ idleMs: 0, growthBytes: -Infinity, log });
    idle.tick();
    idle.tick();
    expect(idle.collections).toBe(0);
    const small = new IdleCollector({ idleMs: 0, growthBytes: 64 * 1024 * MiB, log });
    requests(small, 100);
    small.tick();
    small.tick();
    expect(small.collections).toBe(0);
  });

  test('when TRIAD_IDLE_GC_SECONDS is set, then it is the quiet time (default 10 s, 0 turns it off, a negative value is refused)', () => {
    const env = { TRIAD_DATA_DIR: '/tmp/triad-idle-gc-test' };
    expect(loadConfig(env).idleGcMs).toBe(10_000);
    expect(loadConfig({ ...env, TRIAD_IDLE_GC_SECONDS: '0' }).idleGcMs).toBe(0);
    expect(loadConfig({ ...env, TRIAD_IDLE_GC_SECONDS: '2.5' }).idleGcMs).toBe(2_500);
    expect(() => loadConfig({ ...env, TRIAD_IDLE_GC_SECONDS: '-1' })).toThrow(/TRIAD_IDLE_GC_SECONDS/);
  });
});
