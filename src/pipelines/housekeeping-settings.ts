import { z } from 'zod';
import { parseDuration } from '../webhooks/settings.ts';
import type { CompactionSettings } from './log-compaction.ts';
import type { RetentionSettings } from './retention.ts';

/** A duration (`500ms`, `10s`, `5m`, `1h`, `7d`; a bare number is seconds), `0` allowed when `zero`. */
const duration = (what: string, zero: boolean) =>
  z.string().transform((v, ctx) => {
    const ms = parseDuration(v);
    if (ms === undefined || ms < 0 || (ms === 0 && !zero)) {
      ctx.addIssue({ code: 'custom', message: `${what}: a duration such as 500ms, 10s, 5m, 2h or 7d` });
      return z.NEVER;
    }
    return ms;
  });

/**
 * The environment of CI housekeeping: the retention policy of pipelines (`TRIAD_RETENTION_*`, off
 * unless DAYS or KEEP is set) and step-log compaction (`TRIAD_LOG_COMPACTION_*`).
 */
export const housekeepingEnv = {
  TRIAD_RETENTION_DAYS: z.coerce.number().int().min(1).optional(),
  TRIAD_RETENTION_KEEP: z.coerce.number().int().min(1).optional(),
  TRIAD_RETENTION_INTERVAL: duration('TRIAD_RETENTION_INTERVAL', false).default(3_600_000),
  TRIAD_LOG_COMPACTION_INTERVAL: duration('TRIAD_LOG_COMPACTION_INTERVAL', true).default(10_000),
  TRIAD_LOG_COMPACTION_GRACE: duration('TRIAD_LOG_COMPACTION_GRACE', true).default(600_000),
};

type HousekeepingEnv = z.output<z.ZodObject<typeof housekeepingEnv>>;

export type HousekeepingSettings = { retention: RetentionSettings; logCompaction: CompactionSettings };

export function housekeepingSettings(e: HousekeepingEnv): HousekeepingSettings {
  return {
    retention: {
      days: e.TRIAD_RETENTION_DAYS,
      keep: e.TRIAD_RETENTION_KEEP,
      intervalMs: e.TRIAD_RETENTION_INTERVAL,
    },
    logCompaction: { intervalMs: e.TRIAD_LOG_COMPACTION_INTERVAL, graceMs: e.TRIAD_LOG_COMPACTION_GRACE },
  };
}

/** Defaults (what an unset environment gives): compaction on, retention off. */
export const DEFAULT_HOUSEKEEPING: HousekeepingSettings = {
  retention: { days: undefined, keep: undefined, intervalMs: 3_600_000 },
  logCompaction: { intervalMs: 10_000, graceMs: 600_000 },
};
