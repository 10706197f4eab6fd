import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate, openOrm, startEmbeddedPostgres } from '../../src/db/database.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

/** Starts one PostgreSQL for the whole run and migrates a template database that each test file clones. */
export default async function globalSetup(): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-test-pg-'));
  const log = createLogger('warn');
  const db = await startEmbeddedPostgres(path.join(dir, 'pg'), log);
  const base = db.url.replace(/\/triad$/, '');
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  await admin.query('create database triad_template');
  await admin.end();
  const orm = await openOrm(`${base}/triad_template`, { poolMax: 2 });
  await migrate(`${base}/triad_template`, orm);
  await orm.close();
  process.env.TRIAD_TEST_PG = base;
  // the directories tests make with `tempDir` (helpers/vcs.ts), removed by global-teardown.ts
  process.env.TRIAD_TEST_TEMP_LIST = path.join(dir, 'temp-dirs');
  (globalThis as { __triadPg?: { stop: () => Promise<void>; dir: string } }).__triadPg = {
    stop: db.stop,
    dir,
  };
}
