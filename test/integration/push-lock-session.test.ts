import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { commitFiles, gitRepo } from '../helpers/ci.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { waitFor, waitUntil } from '../helpers/wait.ts';

/**
 * The push lock is a session-level advisory lock on a connection of its own (src/repos/push-locks.ts):
 * when that session ends mid-push (a replica's connection dropped, or the replica died), PostgreSQL
 * releases the lock for the other replicas, and the push that lost it records nothing; its marker
 * stays and the next push records the change it made.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
let db: pg.Client;
beforeAll(async () => {
  ({ s, owner, org } = await serverWithOrg());
  db = new pg.Client({ connectionString: s.dbUrl });
  await db.connect();
});
afterAll(async () => {
  await db.end();
  await s.close();
});

const PUSH_LOCK = 0x70757368;
const exists = (f: string) =>
  fs.access(f).then(
    () => true,
    () => false,
  );

describe('the push lock session', () => {
  test('when the session holding a push lock ends mid-push, then another session gets the lock at once, the push records nothing, and the next push records both changes', async () => {
    const repo = await gitRepo(s, owner, org);
    const first = await commitFiles(repo, { 'a.txt': 'a\n' }, 'first');
    await repo.push();
    const hosted = path.join(s.dataDir, 'repos', `${repo.id}.git`);
    const flags = await fs.mkdtemp(path.join(s.dataDir, 'lost-'));
    const hook = path.join(hosted, 'hooks', 'reference-transaction');
    await fs.mkdir(path.dirname(hook), { recursive: true });
    await fs.writeFile(
      hook,
      `#!/bin/sh\ncat >/dev/null\n[ "$1" = prepared ] || exit 0\n: > '${flags}/entered'\n` +
        `while [ ! -f '${flags}/go' ]; do sleep 0.05; done\n`,
      { mode: 0o755 },
    );
    const second = await commitFiles(repo, { 'b.txt': 'b\n' }, 'second');
    const pushing = repo.push();
    try {
      await waitUntil('the push to reach its ref update', () => exists(path.join(flags, 'entered')));
      const pid = await waitFor('the push lock holder', async () => {
        const r = await db.query<{ pid: number }>(
          `select pid from pg_locks where locktype = 'advisory' and classid = $1 and objid = $2 and granted`,
          [PUSH_LOCK, repo.id],
        );
        return r.rows[0]?.pid;
      });
      // the holder's session ends (as when its replica dies): the lock is free for another one
      await db.query('select pg_terminate_backend($1)', [pid]);
      await waitUntil('the lock to be free', async () => {
        const r = await db.query<{ ok: boolean }>('select pg_try_advisory_lock($1, $2) as ok', [
          PUSH_LOCK,
          repo.id,
        ]);
        return r.rows[0]?.ok === true;
      });
      await db.query('select pg_advisory_unlock($1, $2)', [PUSH_LOCK, repo.id]);
    } finally {
      await fs.writeFile(path.join(flags, 'go'), '');
    }
    await pushing;
    await fs.rm(hook);
    const afters = async () =>
      (await outboxEvents(s, repo.id)).filter((e) => e.event_type === 'push').map((e) => e.payload.after);
    // the change is on disk, but without the lock it was not recorded
    expect(await afters()).toEqual([first]);
    const third = await commitFiles(repo, { 'c.txt': 'c\n' }, 'third');
    await repo.push();
    // the next push first records what the interrupted one changed, then its own change
    expect(await afters()).toEqual([first, second, third]);
    const left = await fs.readdir(path.join(s.dataDir, 'repos', '.triad-pushes')).catch(() => []);
    expect(left.filter((n) => n.startsWith(`${repo.id}-`))).toEqual([]);
  }, 60_000);
});
