import { z } from 'zod';

/** The database connection variables beside DATABASE_URL (docs/configuration.md, docs/operations.md). */
export const databaseEnvShape = {
  DATABASE_DIRECT_URL: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v === '' ? undefined : v)),
  DATABASE_POOL_MODE: z.enum(['session', 'transaction']).default('session'),
  TRIAD_DB_POOL_MAX: z.coerce.number().int().min(1).max(1000).default(20),
};
type DatabaseEnv = z.infer<z.ZodObject<typeof databaseEnvShape>>;

export type DatabaseSettings = {
  /**
   * A connection straight to PostgreSQL for what needs a session of its own: LISTEN/NOTIFY
   * wake-ups, the migration lock and the push locks. Undefined: DATABASE_URL serves for them.
   */
  directUrl: string | undefined;
  /**
   * What sits behind DATABASE_URL: `session` (PostgreSQL itself or a session-mode pooler) or
   * `transaction` (a transaction-mode pooler such as PgBouncer's `pool_mode = transaction`: no
   * named prepared statements there, and DATABASE_DIRECT_URL is required).
   */
  poolMode: 'session' | 'transaction';
  /** Connections of the server's pool on DATABASE_URL. */
  poolMax: number;
};

/** The database settings; a transaction-mode pooler without a direct URL is refused. */
export function databaseSettings(e: DatabaseEnv): DatabaseSettings {
  if (e.DATABASE_POOL_MODE === 'transaction' && e.DATABASE_DIRECT_URL === undefined) {
    throw new Error(
      'invalid configuration: DATABASE_DIRECT_URL is required with DATABASE_POOL_MODE=transaction ' +
        '(a direct PostgreSQL connection for LISTEN/NOTIFY, the migration lock and the push locks, ' +
        'which a transaction-mode pooler such as PgBouncer cannot carry)',
    );
  }
  return { directUrl: e.DATABASE_DIRECT_URL, poolMode: e.DATABASE_POOL_MODE, poolMax: e.TRIAD_DB_POOL_MAX };
}

/**
 * The URL for session-level work (LISTEN, session advisory locks) on the database at `url`:
 * DATABASE_DIRECT_URL when set and `url` is DATABASE_URL (not the embedded database).
 */
export function sessionUrl(url: string, databaseUrl: string | undefined, s: DatabaseSettings): string {
  return databaseUrl === undefined ? url : (s.directUrl ?? url);
}

/** The ORM pool's options for DATABASE_URL (pool size; no named statements behind a transaction pooler). */
export function poolOptions(
  s: DatabaseSettings,
  poolMax = s.poolMax,
): { poolMax: number; prepared: boolean } {
  return { poolMax, prepared: s.poolMode !== 'transaction' };
}
