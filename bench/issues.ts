/**
 * Issue list and search latency with 100,000 issues in one repository (targets: the list well
 * under 50 ms for any filter combination; search p50 <= 20 ms). Starts a server (embedded
 * PostgreSQL in a temporary directory, or DATABASE_URL), creates an org, a private repository,
 * members and labels through the API, seeds the issues (bodies of generated text) with labels,
 * assignees and comments in SQL, then measures p50/p99 of `GET /api/v1/repos/:org/:repo/issues?...`
 * for each filter, sort and combination, and of `GET .../search/issues?q=...` for words of
 * several frequencies, over HTTP in the same run. The tables are printed and recorded in
 * bench/README.md (sections "Issue list" and "Issue search").
 *
 *   npm run bench:issues [-- --issues 100000 --iterations 200 --no-record]
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as prettier from 'prettier';
import { startBenchServer } from './lib/server.ts';

const { values } = parseArgs({
  options: {
    issues: { type: 'string', default: '100000' },
    iterations: { type: 'string', default: '200' },
    'no-record': { type: 'boolean', default: false },
    /** Keep the seeded database up (prints its URL) for EXPLAIN sessions; Ctrl-C ends. */
    hold: { type: 'boolean', default: false },
  },
});
const ISSUES = Number(values.issues);
const ITERATIONS = Number(values.iterations);
const WARMUP = 20;
const USERS = 10;

const server = await startBenchServer('issues');
const running = server.running;
const token = server.token;
const base = running.url;
const call = async (method: string, p: string, auth: string | undefined, body?: unknown) => {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth !== undefined) headers.authorization = `Bearer ${auth}`;
  const r = await fetch(`${base}${p}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 400) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return JSON.parse(text) as Record<string, any>;
};
const sql = (text: string) => running.orm.em.fork().execute(text);

const WORDS = ['crash', 'slow', 'typo', 'login', 'memory', 'render', 'sync', 'build', 'docs', 'network'];
const PLACES = ['startup', 'the editor', 'settings', 'the API', 'search', 'checkout', 'export', 'sidebar'];
const LABELS = ['bug', 'feature', 'perf', 'ui', 'docs', 'security', 'regression', 'question', 'wontfix'];
/**
 * The bodies' words, Zipf-like: draw k of a body (30-69 draws) has probability about
 * 1 / ((k + 1) ln TERMS); k below the list is that word (the first ones, stop words, are in
 * every body and never indexed; `timeout` in about a quarter of the bodies, `negative` in one in
 * twenty), beyond it the made-up `term<k>` (`term1000` in about 600 bodies).
 */
const TERMS = 5000;
const VOCAB = `when the user opens page after update it fails with error and the log shows timeout while
loading config file server client request response cache token session database query index migration
worker queue retry connection socket browser window button dialog menu panel theme font layout scroll
click keyboard shortcut mouse focus tab editor preview upload download archive release tag branch commit
merge rebase push pull clone fetch checkout diff patch review comment expected actual steps reproduce
version linux windows macos firefox chrome safari mobile tablet screen resolution deadlock race leak
overflow panic segfault exception stack trace warning notice deprecated regression flaky test suite
permission denied unauthorized forbidden missing invalid unknown broken wrong duplicate empty null
undefined negative large`.split(/\s+/);

try {
  // --- fixture through the API --------------------------------------------------------------
  await call('POST', '/api/v1/orgs', token, { name: 'bench' });
  const repo = await call('POST', '/api/v1/orgs/bench/repos', token, { name: 'tracker', is_private: true });
  const repoId = repo.data.id as number;
  const userIds: number[] = [];
  let memberToken = '';
  for (let i = 0; i < USERS; i++) {
    const u = await call('POST', '/api/v1/admin/users', token, {
      username: `bench${i}`,
      email: `bench${i}@example.test`,
      display_name: `Bench User ${i}`,
    });
    userIds.push(u.data.id as number);
    await call('PUT', `/api/v1/orgs/bench/members/bench${i}`, token, { role: 'member' });
    if (i === 0) {
      const t = await call('POST', '/api/v1/admin/users/bench0/tokens', token, {
        name: 'bench',
        scopes: ['issues:read', 'issues:write', 'pulls:read'],
      });
      memberToken = t.data.token as string;
    }
  }
  for (const [i, name] of LABELS.entries()) {
    const color = `#${(0x102030 * (i + 1)).toString(16).padStart(6, '0').slice(-6)}`;
    if (i < 2) await call('POST', '/api/v1/admin/labels', token, { name, color });
    else if (i < 4) await call('POST', '/api/v1/orgs/bench/labels', token, { name, color });
    else await call('POST', '/api/v1/repos/bench/tracker/labels', token, { name, color });
  }

  // --- bulk seed in SQL -------------------------------------------------------------------------
  const started = Date.now();
  const users = `array[${userIds.join(',')}]`;
  const words = `array[${WORDS.map((w) => `'${w}'`).join(',')}]`;
  const places = `array[${PLACES.map((w) => `'${w}'`).join(',')}]`;
  const vocab = `array[${VOCAB.map((w) => `'${w}'`).join(',')}]`;
  const labelIds = ((await sql('select id from labels order by id')) as { id: number }[]).map((l) => l.id);
  // Label k (k = 0..8 in creation order) is on (20 - 2k)% of the issues: `bug` is the most common
  // (20%), `wontfix` the rarest (4%).
  const labelExpr = labelIds
    .map((id, k) => `case when random() < ${(0.2 - k * 0.02).toFixed(2)} then ${id} end`)
    .join(', ');
  await sql(`select setseed(0.42)`);
  // One insert, no later updates (a freshly loaded table without update bloat). State mix: 30%
  // new, 35% open, 35% closed; severities, title words, authors and assignees spread
  // independently; 60% of the issues have an assignee (12% two); comment counts are skewed
  // (most issues have none or few, some up to 19).
  await sql(`
    insert into issues (repo_id, number, title, body, state, severity, author_id, label_ids, assignee_ids,
                        comment_count, created_at, updated_at)
    select ${repoId}, g,
           initcap((${words})[1 + (g / 10) % 10]) || ' in ' || (${places})[1 + (g * 13) % 8] || ' #' || g,
           -- 30-69 words (see TERMS), then an error code shared by about five issues
           (select string_agg(case when k < ${VOCAB.length} then (${vocab})[k + 1] else 'term' || k end, ' ')
              from (select floor(exp(random() * ln(${TERMS})))::int - 1 as k
                      from generate_series(1, 30 + g % 40) w where g > 0) d) || ' E' || (g * 7919) % 20000,
           case when r < 0.30 then 'new' when r < 0.65 then 'open' else 'closed' end,
           (array['none','low','medium','high','critical'])[1 + (g / 100) % 5],
           (${users})[1 + (g * 17) % ${USERS}],
           array_remove(array[${labelExpr}], null),
           case when a >= 0.6 then '{}'::int[]
                when a < 0.12 then array[(${users})[1 + (g * 3) % ${USERS}], (${users})[1 + (g * 3 + 1) % ${USERS}]]
                else array[(${users})[1 + (g * 3) % ${USERS}]] end,
           floor(power(random(), 6) * 20)::int,
           now() - (${ISSUES} - g) * interval '1 minute',
           now() - (${ISSUES} - g) * interval '1 minute' + (random() * interval '30 days')
      from (select g, random() as r, random() as a from generate_series(1, ${ISSUES}) g) s`);
  await sql(`
    insert into issue_comments (issue_id, author_id, body, created_at)
    select i.id, (${users})[1 + (c % ${USERS})], 'comment ' || c, i.created_at + c * interval '1 minute'
      from issues i, generate_series(1, i.comment_count) c where i.repo_id = ${repoId}`);
  await sql(`
    insert into repo_counters as c (repo_id, last_issue_number, issues_new, issues_open, issues_closed)
    select ${repoId}, ${ISSUES}, count(*) filter (where state = 'new'), count(*) filter (where state = 'open'),
           count(*) filter (where state = 'closed')
      from issues where repo_id = ${repoId}
    on conflict (repo_id) do update set last_issue_number = excluded.last_issue_number,
      issues_new = excluded.issues_new, issues_open = excluded.issues_open, issues_closed = excluded.issues_closed`);
  await sql('vacuum analyze');
  const seedSeconds = (Date.now() - started) / 1000;
  const [counts] = (await sql(`select
      (select count(*) from issues where repo_id = ${repoId})::int as issues,
      (select sum(cardinality(label_ids)) from issues)::int as labels,
      (select sum(cardinality(assignee_ids)) from issues)::int as assignees,
      (select count(*) from issue_comments)::int as comments`)) as Record<string, number>[];
  console.log(`seeded in ${seedSeconds.toFixed(1)} s:`, counts);

  if (values.hold === true) {
    console.log(`database: ${String(running.orm.config.get('clientUrl'))}; repo_id ${repoId}; Ctrl-C ends`);
    await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
  } else {
    // --- measurements -----------------------------------------------------------------------------
    const u3 = encodeURIComponent('Bench User 3');
    const u5 = encodeURIComponent('Bench User 5');
    const cases: [string, string][] = [
      ['default (state=open, newest)', ''],
      ['state=new', 'state=new'],
      ['state=closed', 'state=closed'],
      ['state=active', 'state=active'],
      ['state=all', 'state=all'],
      ['sort=oldest', 'sort=oldest'],
      ['sort=updated', 'sort=updated'],
      ['sort=comments', 'sort=comments'],
      ['state=all&sort=updated', 'state=all&sort=updated'],
      ['state=all&sort=comments', 'state=all&sort=comments'],
      ['state=active&sort=comments', 'state=active&sort=comments'],
      ['severity=high', 'severity=high'],
      ['label=bug', 'label=bug'],
      ['label=wontfix (rare)', 'label=wontfix'],
      ['assignee', `assignee=${u3}`],
      ['author', `author=${u5}`],
      ['q=crash (common)', 'q=crash'],
      ['q=zzz (no match)', 'q=zzz'],
      ['q=#4242 (selective)', `q=${encodeURIComponent('#4242')}`],
      ['state=all&q=sync&sort=updated', 'state=all&q=sync&sort=updated'],
      ['state=active&label=bug&severity=high', 'state=active&label=bug&severity=high'],
      ['label=bug&assignee&sort=comments', `label=bug&assignee=${u3}&sort=comments`],
      ['state=all&author&q=login&sort=updated', `state=all&author=${u5}&q=login&sort=updated`],
      [
        'all filters (active, severity, label, assignee, author, q)',
        `state=active&severity=medium&label=perf&assignee=${u5}&author=${u5}&q=in&sort=comments`,
      ],
      ['state=all&per_page=100', 'state=all&per_page=100'],
      ['state=all&page=1000 (deep)', 'state=all&page=1000'],
    ];
    type Row = { name: string; query: string; total: number; first: number; p50: number; p99: number };
    const measure = async (cases: [string, string][], path: string): Promise<Row[]> => {
      const rows: Row[] = [];
      for (const [name, query] of cases) {
        const url = `/api/v1/repos/bench/tracker/${path}${query === '' ? '' : `?${query}`}`;
        let total = 0;
        let first = 0;
        const times: number[] = [];
        for (let i = 0; i < WARMUP + ITERATIONS; i++) {
          const t0 = process.hrtime.bigint();
          const r = await call('GET', url, memberToken);
          const ms = Number(process.hrtime.bigint() - t0) / 1e6;
          if (i === 0) first = ms;
          if (i >= WARMUP) times.push(ms);
          total = r.pagination.total as number;
        }
        times.sort((a, b) => a - b);
        const pick = (q: number) => times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)]!;
        rows.push({ name, query, total, first, p50: pick(0.5), p99: pick(0.99) });
        console.log(
          `${name.padEnd(60)} total=${String(total).padStart(6)} first=${first.toFixed(2)} ms p50=${pick(0.5).toFixed(2)} ms p99=${pick(0.99).toFixed(2)} ms`,
        );
      }
      return rows;
    };
    // the machine may be shared: the load when the measurements start goes in the record
    const load = os.loadavg()[0]!;
    const rows = await measure(cases, 'issues');
    const q = (text: string) => `q=${encodeURIComponent(text)}`;
    const searchRows = await measure(
      [
        ['title word (10% of titles)', q('crash')],
        ['common body word', q('timeout')],
        ['word in titles and bodies', q('editor')],
        ['body word, 1 in 20', q('negative')],
        ['rare body word', q('term1000')],
        ['error code (selective)', q('E4242')],
        ['two words', q('deadlock memory')],
        ['phrase', q('"stack trace"')],
        ['title word and body word', q('crash timeout')],
        ['no match', q('zzz')],
        ['common body word, kind=issue', `${q('timeout')}&kind=issue`],
        ['common body word, per_page=100', `${q('timeout')}&per_page=100`],
        ['common body word, page 100', `${q('timeout')}&page=100`],
      ],
      'search/issues',
    );
    // The list in the same run, side by side: the plain list and its title filter (trigram).
    const baseline = rows.filter((r) => r.name.startsWith('default') || r.name.startsWith('q=crash'));

    // --- record -----------------------------------------------------------------------------------
    const [pgVersion] = (await sql('show server_version')) as { server_version: string }[];
    const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
    const cell = (query: string) =>
      `\`${query === '' ? '(none)' : decodeURIComponent(query).replace(/\|/g, '\\|')}\``;
    const tableOf = (list: Row[], endpoint?: (r: Row) => string) =>
      [
        `| Case |${endpoint === undefined ? '' : ' Endpoint |'} Query | Matches | first (ms) | p50 (ms) | p99 (ms) |`,
        `|---|${endpoint === undefined ? '' : '---|'}---|---:|---:|---:|---:|`,
        ...list.map(
          (r) =>
            `| ${r.name} |${endpoint === undefined ? '' : ` ${endpoint(r)} |`} ${cell(r.query)} | ${r.total} | ${r.first.toFixed(2)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} |`,
        ),
      ].join('\n');
    const table = tableOf(rows);
    const searchTable = tableOf([...searchRows, ...baseline], (r) =>
      searchRows.includes(r) ? '`search/issues`' : '`issues` (list)',
    );
    const recorded = `Recorded ${new Date().toISOString().slice(0, 10)} on ${cpu} (${os.cpus().length} CPUs), Node
${process.version}, PostgreSQL ${pgVersion?.server_version ?? '?'} (embedded, default settings);
seeding took ${seedSeconds.toFixed(1)} s; load average ${load.toFixed(1)} when the measurements started.`;
    const section = `<!-- bench:issues:start -->
## Issue list (\`npm run bench:issues\`)

\`bench/issues.ts\` starts the server with an embedded PostgreSQL, creates a private repository
with ${USERS} org members and ${LABELS.length} labels (admin, org and repo scopes) through the API,
then seeds in SQL ${counts?.issues} issues (30% new, 35% open, 35% closed; five severities),
${counts?.labels} label links, ${counts?.assignees} assignments and ${counts?.comments} comments
(loaded in one insert each, so without update bloat), runs \`VACUUM ANALYZE\`, and measures
\`GET /api/v1/repos/bench/tracker/issues?...\` over HTTP with a member's token: ${WARMUP} warm-up
requests, then ${ITERATIONS} measured sequential requests per case (default page size 30; the
response includes the total count, labels, assignees and authors of the page). Titles are
"<Word> in <place> #<number>"; bodies are 30-69 words of generated text (see "Issue search").

Schema and indexes (migration \`0003-issues\`): labels and assignees are integer arrays on the
issue row, so every filter is a predicate on one table and PostgreSQL combines indexes (BitmapAnd)
as it sees fit: ordered indexes per sort (\`number\`, \`updated_at desc\`, \`comment_count desc\`),
each as \`(repo_id, state, ...)\`, \`(repo_id, ...)\` and partial \`where state <> 'closed'\` (for
\`active\`); \`(repo_id, severity, state, number)\`, \`(repo_id, author_id, state, number)\`; GIN
on \`label_ids\` and \`assignee_ids\`; a \`pg_trgm\` GIN on \`lower(title)\` for \`q\`. Pages are
read as numbers first (index-only for the plain state lists, so deep pages stay cheap), then
rows. Totals of state-only lists come from per-state counts kept in \`repo_counters\` in the
transaction of every state change; filtered lists count with the same predicates.

${recorded}

${table}
<!-- bench:issues:end -->`;
    const searchSection = `<!-- bench:issue-search:start -->
## Issue search (\`npm run bench:issues\`)

Target (issue 27): a 100,000-issue repository answers search p50 <= 20 ms. The same run as the
issue list above (same server, data and token) measures
\`GET /api/v1/repos/bench/tracker/search/issues?q=...\` (issues and pull requests; the repository
has no pull requests, so their table answers nothing) the same way, and the list again beside it.
Bodies are 30-69 words drawn Zipf-like from ${TERMS} terms (a list of ${VOCAB.length} words,
then made-up \`term<k>\`), plus an error code \`E<n>\` shared by about five issues.

Schema (migration \`0013-search\`): generated columns \`search\` (title weight A, body weight B)
and \`search_title\` (title), configuration \`english\`, each with a GIN index led by
\`repo_id\` (\`btree_gin\`). A search counts its matches (the \`total\`), reads the page of the
title matches and, when the page goes past them, of the others, newest first: a rare word reads
its index, a common one walks the \`(repo_id, number)\` index backwards and stops at the page
(the title matches are counted only when a page starts past them); then the issues of the page
as the list shows them. The exact count is what grows with the number of matches: it visits
every matching row (about 0.5 µs each), so a word in a quarter of the issues spends most of its
time there, while the page itself takes under a millisecond. Counts are therefore kept, in each
server process, with the repository's text version (\`search_versions\`, raised by triggers on
every insert, delete and title or body change of an issue or pull request): the next page, or
the same search again, does not recount while nothing changed. \`first\` is the first request of
each case (its count not kept yet), p50 and p99 the ${ITERATIONS} measured after the warm-up.

${recorded}

${searchTable}
<!-- bench:issue-search:end -->`;
    console.log(`\n${table}\n\n${searchTable}`);
    if (values['no-record'] !== true) {
      const readme = path.join(import.meta.dirname, 'README.md');
      const current = await fs
        .readFile(readme, 'utf8')
        .catch(
          () =>
            '# Benchmarks\n\nReproducible benchmarks; each section says how to run it and what was measured.\n',
        );
      let next = current;
      for (const [name, text] of [
        ['issues', section],
        ['issue-search', searchSection],
      ] as const) {
        const re = new RegExp(`<!-- bench:${name}:start -->[\\s\\S]*<!-- bench:${name}:end -->`);
        // a new section goes after the issue list's
        const after = '<!-- bench:issues:end -->';
        if (re.test(next)) next = next.replace(re, text);
        else if (next.includes(after)) next = next.replace(after, `${after}\n\n${text}`);
        else next = `${next.trimEnd()}\n\n${text}\n`;
      }
      // The README stays in Prettier's format (`npm run lint` checks it).
      const options = (await prettier.resolveConfig(readme)) ?? {};
      await fs.writeFile(readme, await prettier.format(next, { ...options, filepath: readme }));
      console.log(`recorded in ${readme}`);
    }
  }
} finally {
  await server.close();
}
