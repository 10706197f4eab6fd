import { z } from 'zod';
import { parseAllowedHosts, type HostPolicy } from './ssrf.ts';

/** The webhook settings of `Config` (environment variables `TRIAD_WEBHOOK_*`). */
export type WebhookSettings = {
  allowedHosts: HostPolicy;
  /** Delays between automatic attempts; its length is the number of retries. */
  retrySchedule: readonly number[];
  /** Total deadline of one attempt (connect, headers and body). */
  timeoutMs: number;
  /** Consecutive failed deliveries that disable a webhook (0: never). */
  disableAfter: number;
  /** History kept per webhook: at most this many records, none older than `historyMaxAgeMs`. */
  historyMax: number;
  historyMaxAgeMs: number;
  /** Attempts in flight at once per server. */
  concurrency: number;
};

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `250ms`, `5s`, `5m`, `2h`, `7d` (a bare number is seconds) -> milliseconds, or undefined. */
export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text);
  if (m === null) return undefined;
  return Math.round(Number(m[1]) * (UNIT_MS[(m[2] ?? 's').toLowerCase()] ?? 1000));
}

export const durationVar = (what: string) =>
  z.string().transform((v, ctx) => {
    const ms = parseDuration(v);
    if (ms === undefined || ms <= 0) {
      ctx.addIssue({
        code: 'custom',
        message: `${what}: a positive duration such as 500ms, 10s, 5m, 2h or 7d`,
      });
      return z.NEVER;
    }
    return ms;
  });

export const scheduleVar = z.string().transform((v, ctx) => {
  const parts = v.split(',').map((x) => x.trim());
  if (parts.length === 1 && (parts[0] === 'none' || parts[0] === '0')) return [];
  const delays = parts.map(parseDuration);
  if (delays.some((d) => d === undefined || d <= 0) || delays.length > 50) {
    ctx.addIssue({
      code: 'custom',
      message: 'a comma list of at most 50 positive durations such as 5s,5m,30m,2h, or "none"',
    });
    return z.NEVER;
  }
  return delays as number[];
});

export const allowedHostsVar = z.string().transform((v, ctx) => {
  try {
    return parseAllowedHosts(v);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: (e as Error).message });
    return z.NEVER;
  }
});

export const DEFAULT_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';

/** The `TRIAD_WEBHOOK_*` entries of the environment schema. */
export const webhookEnv = {
  TRIAD_WEBHOOK_ALLOWED_HOSTS: allowedHostsVar.default(parseAllowedHosts('external')),
  TRIAD_WEBHOOK_RETRY_SCHEDULE: scheduleVar.default(scheduleVar.parse(DEFAULT_RETRY_SCHEDULE)),
  TRIAD_WEBHOOK_TIMEOUT: durationVar('TRIAD_WEBHOOK_TIMEOUT').default(10_000),
  TRIAD_WEBHOOK_DISABLE_AFTER: z.coerce.number().int().min(0).default(10),
  TRIAD_WEBHOOK_HISTORY_MAX: z.coerce.number().int().min(1).max(1_000_000).default(1000),
  TRIAD_WEBHOOK_HISTORY_AGE: durationVar('TRIAD_WEBHOOK_HISTORY_AGE').default(7 * 86_400_000),
  TRIAD_WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(128),
};

type WebhookEnv = { [K in keyof typeof webhookEnv]: z.output<(typeof webhookEnv)[K]> };

export function webhookSettings(e: WebhookEnv): WebhookSettings {
  return {
    allowedHosts: e.TRIAD_WEBHOOK_ALLOWED_HOSTS,
    retrySchedule: e.TRIAD_WEBHOOK_RETRY_SCHEDULE,
    timeoutMs: e.TRIAD_WEBHOOK_TIMEOUT,
    disableAfter: e.TRIAD_WEBHOOK_DISABLE_AFTER,
    historyMax: e.TRIAD_WEBHOOK_HISTORY_MAX,
    historyMaxAgeMs: e.TRIAD_WEBHOOK_HISTORY_AGE,
    concurrency: e.TRIAD_WEBHOOK_CONCURRENCY,
  };
}
