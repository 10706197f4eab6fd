import { describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { poolOptions, sessionUrl } from '../../src/db/settings.ts';

const POOLED = 'postgres://u:p@pgbouncer:6432/triad';
const DIRECT = 'postgres://u:p@db:5432/triad';

describe('database pool settings', () => {
  test('when none is set, then DATABASE_URL serves for everything, in session mode, with a pool of 20', () => {
    const c = loadConfig({ DATABASE_URL: DIRECT });
    expect(c.database).toEqual({ directUrl: undefined, poolMode: 'session', poolMax: 20 });
    expect(sessionUrl(DIRECT, c.databaseUrl, c.database)).toBe(DIRECT);
    expect(poolOptions(c.database)).toEqual({ poolMax: 20, prepared: true });
  });

  test('when a transaction-mode pooler is configured with its direct URL, then sessions go direct and the pool uses plain statements', () => {
    const c = loadConfig({
      DATABASE_URL: POOLED,
      DATABASE_DIRECT_URL: DIRECT,
      DATABASE_POOL_MODE: 'transaction',
      TRIAD_DB_POOL_MAX: '8',
    });
    expect(c.database).toEqual({ directUrl: DIRECT, poolMode: 'transaction', poolMax: 8 });
    expect(sessionUrl(POOLED, c.databaseUrl, c.database)).toBe(DIRECT);
    expect(poolOptions(c.database)).toEqual({ poolMax: 8, prepared: false });
    expect(poolOptions(c.database, 2)).toEqual({ poolMax: 2, prepared: false });
    // the embedded database (no DATABASE_URL) is never reached through the direct URL
    expect(sessionUrl('postgres://embedded/triad', undefined, c.database)).toBe('postgres://embedded/triad');
  });

  test('when transaction mode lacks the direct URL or a value is malformed, then the configuration is refused naming the variable', () => {
    expect(() => loadConfig({ DATABASE_URL: POOLED, DATABASE_POOL_MODE: 'transaction' })).toThrow(
      'DATABASE_DIRECT_URL is required with DATABASE_POOL_MODE=transaction',
    );
    expect(() => loadConfig({ DATABASE_POOL_MODE: 'statement' })).toThrow(/DATABASE_POOL_MODE/);
    expect(() => loadConfig({ TRIAD_DB_POOL_MAX: '0' })).toThrow(/TRIAD_DB_POOL_MAX/);
    expect(() => loadConfig({ TRIAD_DB_POOL_MAX: 'many' })).toThrow(/TRIAD_DB_POOL_MAX/);
  });
});
