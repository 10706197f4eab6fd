import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { openOrm, type Orm } from '../../src/db/database.ts';
import { first } from '../../src/db/query.ts';
import { orgByName } from '../../src/orgs/repository.ts';
import { targetByNames } from '../../src/repos/repository.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, serverWithOrg } from '../helpers/factories.ts';

/**
 * The lookups every request makes run as named prepared statements (parsed and planned once per
 * connection), except inside a transaction, where they must see the transaction's own writes.
 */
let s: TestServer;
let orm: Orm;
let org: string;
let repo: string;
beforeAll(async () => {
  let owner: TestUser;
  ({ s, owner, org } = await serverWithOrg());
  repo = (await newRepo(owner, org, { vcs: 'git', name: uniq('prep') })).name;
  // one connection, so what the statements left on it can be read back
  orm = await openOrm(s.dbUrl, { poolMax: 1 });
}, 120_000);
afterAll(async () => {
  await orm.close();
  await s.close();
});

async function preparedOnConnection(): Promise<string[]> {
  const rows = await orm.em.fork().execute<{ name: string }[]>('select name from pg_prepared_statements');
  return rows.map((r) => r.name).sort();
}

describe('prepared lookups', () => {
  test('when a repository is looked up twice, then its statement is prepared once on the connection and both answers agree with the plain statement', async () => {
    expect(await preparedOnConnection()).toEqual([]);
    const a = await targetByNames(orm.em.fork(), org.toUpperCase(), repo);
    const b = await targetByNames(orm.em.fork(), org, repo.toUpperCase());
    expect(await preparedOnConnection()).toEqual(['triad_repo_target']);
    expect(a).toEqual(b);
    expect(a?.org.name).toBe(org);
    expect(a?.repo).toMatchObject({ name: repo, isPrivate: false });
    // the same rows and value types as the ORM's own path (its type parsers: dates, booleans)
    const viaOrm = await first(
      orm.em.fork(),
      'select id, name, description, created_at as "createdAt" from orgs where name = ?',
      [org],
    );
    expect(await orgByName(orm.em.fork(), org)).toEqual(viaOrm);
    expect(await targetByNames(orm.em.fork(), org, uniq('missing'))).toBeUndefined();
  });

  test("when a lookup runs inside a transaction, then it runs on the transaction's connection: it sees the uncommitted change and prepares nothing there", async () => {
    // a second single-connection ORM: the transaction holds its only connection, so a lookup
    // sent to the pool instead would wait for it for good (this test then times out)
    const own = await openOrm(s.dbUrl, { poolMax: 1 });
    try {
      const renamed = uniq('renamed');
      const seen = await own.em
        .fork()
        .transactional(async (tx) => {
          await tx.execute('update repos set name = ? where lower(name) = lower(?)', [renamed, repo]);
          const inside = await targetByNames(tx, org, renamed);
          const prepared = await tx.execute<{ name: string }[]>('select name from pg_prepared_statements');
          throw Object.assign(new Error('roll back'), { inside, prepared: prepared.map((r) => r.name) });
        })
        .catch((e: { inside?: unknown; prepared?: unknown }) => e);
      expect(seen.inside).toMatchObject({ repo: { name: renamed } });
      expect(seen.prepared).toEqual([]);
      // rolled back: the old name stands
      expect(await targetByNames(own.em.fork(), org, renamed)).toBeUndefined();
      expect((await targetByNames(own.em.fork(), org, repo))?.repo.name).toBe(repo);
    } finally {
      await own.close(true);
    }
  }, 20_000);
});
