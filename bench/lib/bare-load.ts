/**
 * The bare `node:http` server of `bench/load.ts`, in its own process: the same reads as Triad's
 * issue list and blob read, without the framework, authentication or validation layers, on the
 * same database and with the same statements Triad makes for an anonymous caller (repository by
 * organization and repository name, the state counters, the page of numbers, the rows, the
 * authors; the lookup prepared, as Triad's is), and the blob through the same pooled VCS reader.
 * Its connection pool has Triad's size. Prints `listening <port>` once it accepts connections.
 *
 *   BARE_DATABASE_URL=... BARE_STORE=/path/to/git/store node bench/lib/bare-load.ts
 */
import http from 'node:http';
import pg from 'pg';
import { createVcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';

const url = process.env.BARE_DATABASE_URL;
const store = process.env.BARE_STORE;
if (url === undefined || store === undefined)
  throw new Error('BARE_DATABASE_URL and BARE_STORE are required');
const db = new pg.Pool({ connectionString: url, max: Number(process.env.BARE_POOL ?? 20) });
const vcs = createVcs({ pool: new ProcessPool(), tmpDir: '/tmp' });
const ISSUE = `i.id, i.repo_id, i.number, i.title, i.body, i.state, i.severity, i.author_id,
  i.label_ids, i.assignee_ids, i.comment_count, i.created_at, i.updated_at`;

async function answer(reqUrl: string): Promise<unknown> {
  // a named (prepared) statement, as Triad's lookup by names is
  const found = await db.query<{ id: number; is_private: boolean }>({
    name: 'repo_target',
    text: `select r.id, r.is_private from repos r join orgs o on o.id = r.org_id
      where lower(o.name) = lower($1) and lower(r.name) = lower($2)`,
    values: ['bench', 'load'],
  });
  const r = found.rows[0]!;
  if (r.is_private) throw new Error('private');
  if (!reqUrl.startsWith('/issues'))
    return { data: await vcs.reader('git', store!).blob('main', 'README.md') };
  const counts = await db.query<{ n: number; o: number; c: number }>(
    'select issues_new as n, issues_open as o, issues_closed as c from repo_counters where repo_id = $1',
    [r.id],
  );
  const nums = await db.query<{ number: number }>(
    'select i.number from issues i where i.repo_id = $1 order by i.number desc limit 30 offset 0',
    [r.id],
  );
  const rows = await db.query<{ author_id: number }>(
    `select ${ISSUE} from issues i where i.repo_id = $1 and i.number = any($2::int[])`,
    [r.id, nums.rows.map((n) => n.number)],
  );
  const authors = await db.query(
    `select id, username, display_name as "displayName", avatar_url as "avatarUrl"
      from users where id = any($1::int[])`,
    [[...new Set(rows.rows.map((i) => i.author_id))]],
  );
  const c = counts.rows[0]!;
  return {
    data: rows.rows,
    authors: authors.rows,
    pagination: { page: 1, per_page: 30, total: c.n + c.o + c.c },
  };
}

const server = http.createServer((req, res) => {
  answer(req.url ?? '/').then(
    (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
    (e: unknown) => res.writeHead(500).end(String(e)),
  );
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`);
});
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  vcs.closeProcesses();
  void db.end().then(() => process.exit(0));
});
