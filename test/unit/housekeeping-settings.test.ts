import { describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';

describe('retention and log compaction settings', () => {
  test('unset, retention is off and compaction runs every 10 s with a 10 minute grace', () => {
    expect(loadConfig({}).housekeeping).toEqual({
      retention: { days: undefined, keep: undefined, intervalMs: 3_600_000 },
      logCompaction: { intervalMs: 10_000, graceMs: 600_000 },
    });
  });

  test('each variable is read; either retention limit may be set alone; 0 turns compaction off', () => {
    const c = loadConfig({
      TRIAD_RETENTION_DAYS: '30',
      TRIAD_RETENTION_INTERVAL: '15m',
      TRIAD_LOG_COMPACTION_INTERVAL: '0',
      TRIAD_LOG_COMPACTION_GRACE: '0',
    }).housekeeping;
    expect(c).toEqual({
      retention: { days: 30, keep: undefined, intervalMs: 900_000 },
      logCompaction: { intervalMs: 0, graceMs: 0 },
    });
    expect(loadConfig({ TRIAD_RETENTION_KEEP: '500' }).housekeeping.retention.keep).toBe(500);
  });

  test('values that are not whole positive counts or durations are refused at start', () => {
    for (const [name, value] of [
      ['TRIAD_RETENTION_DAYS', '0'],
      ['TRIAD_RETENTION_DAYS', '1.5'],
      ['TRIAD_RETENTION_KEEP', 'all'],
      ['TRIAD_RETENTION_INTERVAL', '0'],
      ['TRIAD_LOG_COMPACTION_GRACE', 'soon'],
    ]) {
      expect(() => loadConfig({ [name!]: value! })).toThrow(name);
    }
  });
});
