import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { VcsKind } from './index.ts';

const exec = promisify(execFile);
const MAX_COMMITS = 50;
const ENV = { ...process.env, HGPLAIN: '1', GIT_TERMINAL_PROMPT: '0', LANG: 'C.UTF-8' };

async function out(cmd: string, args: string[], cwd?: string): Promise<string> {
  const r = await exec(cmd, args, { env: ENV, cwd, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' });
  return r.stdout;
}

// `fossil sql` prints rows in SQLite's quote mode; every selected field is hex() so that
// arbitrary text survives, and the fields are decoded here.
/** The refs of a repository at one moment: what push detection compares before and after. */
export type Snapshot = {
  tip: string;
  /** Git: branch -> head. Mercurial: branch -> heads joined by ','. Fossil: branch -> newest leaf. */
  branches: Map<string, string>;
  bookmarks: Map<string, string>;
  tags: Map<string, string>;
  /** Mercurial: tip revision number; Fossil: highest artifact rid. New commits lie above it. */
  mark: number;
};

export type CommitInfo = {
  id: string;
  message: string;
  author: { name: string; email: string; date: string };
};

/**
 * A push or tag event: `payload` is the spec's payload; `commit` and `branch` say which commit
 * the ref now names (what CI builds) — for Mercurial `payload.after` is the changegroup tip.
 */
export type PushEvent = {
  type: 'push' | 'tag';
  payload: Record<string, unknown>;
  commit: string;
  branch: string;
};

const FIELD = '\x1f';
const RECORD = '\x1e';

function commitRecords(text: string): CommitInfo[] {
  return text
    .split(RECORD)
    .map((r) => r.replace(/^\n/, ''))
    .filter((r) => r !== '')
    .map((r) => {
      const [id = '', name = '', email = '', date = '', message = ''] = r.split(FIELD);
      return { id, message: message.replace(/\n+$/, ''), author: { name, email, date: toUtc(date) } };
    });
}

function toUtc(d: string): string {
  const t = new Date(d);
  return Number.isNaN(t.getTime()) ? d : t.toISOString().replace('.000Z', 'Z');
}

// ---------------------------------------------------------------- git

async function gitSnapshot(dir: string): Promise<Snapshot> {
  const refs = await out('git', [
    '-C',
    dir,
    'for-each-ref',
    `--format=%(refname)${FIELD}%(objectname)${FIELD}%(*objectname)`,
  ]);
  const branches = new Map<string, string>();
  const tags = new Map<string, string>();
  for (const line of refs.split('\n')) {
    const [ref = '', obj = '', peeled = ''] = line.split(FIELD);
    if (ref.startsWith('refs/heads/')) branches.set(ref.slice(11), obj);
    else if (ref.startsWith('refs/tags/')) tags.set(ref.slice(10), peeled !== '' ? peeled : obj);
  }
  const head = (await out('git', ['-C', dir, 'symbolic-ref', '--quiet', 'HEAD']).catch(() => '')).trim();
  const tip = branches.get(head.replace(/^refs\/heads\//, '')) ?? '';
  return { tip, branches, bookmarks: new Map(), tags, mark: 0 };
}

async function gitCommits(dir: string, ids: string[]): Promise<CommitInfo[]> {
  if (ids.length === 0) return [];
  const text = await out('git', [
    '-C',
    dir,
    'log',
    '--no-walk=unsorted',
    `--format=%H${FIELD}%an${FIELD}%ae${FIELD}%aI${FIELD}%B${RECORD}`,
    ...ids,
  ]);
  return commitRecords(text);
}

async function gitNewIds(
  dir: string,
  after: string,
  before: Snapshot,
): Promise<{ ids: string[]; total: number }> {
  const not = [...new Set(before.branches.values())];
  const args = ['-C', dir, 'rev-list', after, ...(not.length > 0 ? ['--not', ...not] : [])];
  const ids = (await out('git', args)).split('\n').filter((l) => l !== '');
  return { ids: ids.slice(0, MAX_COMMITS), total: ids.length };
}

// ---------------------------------------------------------------- mercurial

const HG = '/usr/bin/hg';

async function hgSnapshot(dir: string): Promise<Snapshot> {
  const text = await out(HG, [
    '-R',
    dir,
    'log',
    '--hidden',
    '-r',
    'head() or bookmark() or tag() or tip',
    '-T',
    `{node}${FIELD}{rev}${FIELD}{branch}${FIELD}{join(bookmarks,"\x1d")}${FIELD}{join(tags,"\x1d")}\n`,
  ]);
  const branches = new Map<string, string>();
  const bookmarks = new Map<string, string>();
  const tags = new Map<string, string>();
  let tip = '';
  let mark = -1;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [node = '', rev = '', branch = '', bms = '', tgs = ''] = line.split(FIELD);
    if (rev === '-1') continue; // the null revision of an empty repository
    for (const b of bms.split('\x1d')) if (b !== '') bookmarks.set(b, node);
    for (const t of tgs.split('\x1d')) {
      if (t === 'tip') {
        tip = node;
        mark = Number(rev);
      } else if (t !== '') tags.set(t, node);
    }
    const heads = branches.get(branch);
    branches.set(branch, heads === undefined ? node : `${heads},${node}`);
  }
  return { tip, branches, bookmarks, tags, mark };
}

async function hgCommits(dir: string, revset: string, limit: number): Promise<CommitInfo[]> {
  const text = await out(HG, [
    '-R',
    dir,
    'log',
    '-r',
    revset,
    '-l',
    String(limit),
    '-T',
    `{node}${FIELD}{person(author)}${FIELD}{email(author)}${FIELD}{date|rfc3339date}${FIELD}{desc}${RECORD}`,
  ]);
  return commitRecords(text);
}

async function hgCount(dir: string, revset: string): Promise<number> {
  const text = await out(HG, ['-R', dir, 'log', '-r', revset, '-T', 'x']);
  return text.length;
}

async function hgBranchOf(dir: string, revset: string): Promise<Map<string, string[]>> {
  const text = await out(HG, ['-R', dir, 'log', '-r', revset, '-T', `{node}${FIELD}{branch}\n`]);
  const m = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const [node = '', branch = ''] = line.split(FIELD);
    if (node === '') continue;
    m.set(branch, [...(m.get(branch) ?? []), node]);
  }
  return m;
}

// ---------------------------------------------------------------- fossil

async function fossilSql(file: string, sql: string): Promise<string[][]> {
  const text = await out('fossil', ['sql', '-R', file, '--readonly', sql]);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(',').map((f) => Buffer.from(f.replace(/^'|'$/g, ''), 'hex').toString('utf8')));
}

const BRANCH_OF = (rid: string) =>
  `(select value from tagxref x where x.rid = ${rid} and x.tagtype > 0 and x.tagid = (select tagid from tag where tagname = 'branch'))`;

async function fossilSnapshot(file: string): Promise<Snapshot> {
  const [tipRow] = await fossilSql(
    file,
    `select hex(b.uuid), hex(cast((select max(rid) from blob) as text)) from event e join blob b on b.rid = e.objid
      where e.type = 'ci' order by e.mtime desc limit 1`,
  );
  const leaves = await fossilSql(
    file,
    `select hex(coalesce(${BRANCH_OF('l.rid')}, 'trunk')), hex(b.uuid) from leaf l join blob b on b.rid = l.rid
       join event e on e.objid = l.rid order by e.mtime asc`,
  );
  const tags = await fossilSql(
    file,
    `select hex(substr(t.tagname, 5)), hex(b.uuid) from tagxref x join tag t on t.tagid = x.tagid
       join blob b on b.rid = x.rid where t.tagname like 'sym-%' and x.tagtype = 1`,
  );
  const [maxRow] = await fossilSql(file, `select hex(cast(coalesce(max(rid), 0) as text)) from blob`);
  return {
    tip: tipRow?.[0] ?? '',
    branches: new Map(leaves.map(([b = '', u = '']) => [b, u])),
    bookmarks: new Map(),
    tags: new Map(tags.map(([n = '', u = '']) => [n, u])),
    mark: Number(maxRow?.[0] ?? 0),
  };
}

/** Check-ins matching `where` (over `event e` joined to `blob b`), newest first. */
async function fossilCommits(file: string, where: string, limit: number): Promise<CommitInfo[]> {
  const rows = await fossilSql(
    file,
    `select hex(b.uuid), hex(e.user), hex(''), hex(strftime('%Y-%m-%dT%H:%M:%SZ', e.mtime)),
            hex(coalesce(e.ecomment, e.comment, ''))
       from event e join blob b on b.rid = e.objid where ${where} order by e.mtime desc limit ${limit}`,
  );
  return rows.map(([id = '', name = '', email = '', date = '', message = '']) => ({
    id,
    message,
    author: { name, email, date },
  }));
}

async function fossilNewCommits(
  file: string,
  branch: string,
  mark: number,
): Promise<{ c: CommitInfo[]; total: number }> {
  const where = `e.type = 'ci' and e.objid > ${mark} and coalesce(${BRANCH_OF('e.objid')}, 'trunk') = '${branch.replace(/'/g, "''")}'`;
  const [count] = await fossilSql(file, `select hex(cast(count(*) as text)) from event e where ${where}`);
  return { c: await fossilCommits(file, where, MAX_COMMITS), total: Number(count?.[0] ?? 0) };
}

// ---------------------------------------------------------------- common

export async function snapshot(vcs: VcsKind, dir: string): Promise<Snapshot> {
  switch (vcs) {
    case 'git':
      return gitSnapshot(dir);
    case 'hg':
      return hgSnapshot(dir);
    case 'fossil':
      return fossilSnapshot(dir);
  }
}

export type PushContext = {
  vcs: VcsKind;
  dir: string;
  defaultBranch: string;
  /** Builds a commit's URL from its id. */
  commitUrl: (id: string) => string;
};

function shortId(vcs: VcsKind, id: string): string {
  return id.slice(0, vcs === 'fossil' ? 10 : 12);
}

export function commitJson(ctx: PushContext, c: CommitInfo) {
  const subject = c.message.split('\n')[0] ?? '';
  return {
    id: c.id,
    short_id: shortId(ctx.vcs, c.id),
    message: c.message,
    subject,
    author: c.author,
    url: ctx.commitUrl(c.id),
  };
}

function pushPayload(
  ctx: PushContext,
  p: {
    ref: string;
    refType: 'branch' | 'bookmark';
    isDefault: boolean;
    before: string;
    after: string;
    created: boolean;
  },
  commits: CommitInfo[],
  total: number,
) {
  const list = commits.slice(0, MAX_COMMITS).map((c) => commitJson(ctx, c));
  return {
    ref: p.ref,
    ref_type: p.refType,
    default: p.isDefault,
    before: p.before,
    after: p.after,
    created: p.created,
    deleted: false,
    commits: list,
    head_commit: list[0] ?? null,
    total_commits: list.length,
    truncated: total > MAX_COMMITS,
  };
}

async function tagEvents(ctx: PushContext, before: Snapshot, after: Snapshot): Promise<PushEvent[]> {
  const changed = [...after.tags].filter(([name, target]) => before.tags.get(name) !== target);
  if (changed.length === 0) return [];
  const infos = await commitsById(
    ctx,
    changed.map(([, t]) => t),
  );
  return changed.map(([name, target]) => {
    const c = infos.get(target);
    return {
      type: 'tag' as const,
      commit: target,
      branch: '',
      payload: {
        ref: name,
        ref_type: 'tag',
        created: true,
        target,
        ...(c === undefined ? {} : { commit: commitJson(ctx, c) }),
      },
    };
  });
}

async function commitsById(ctx: PushContext, ids: string[]): Promise<Map<string, CommitInfo>> {
  const unique = [...new Set(ids)];
  let list: CommitInfo[] = [];
  switch (ctx.vcs) {
    case 'git':
      list = await gitCommits(ctx.dir, unique).catch(() => []);
      break;
    case 'hg':
      list = await hgCommits(ctx.dir, unique.join(' or '), unique.length).catch(() => []);
      break;
    case 'fossil': {
      const ids = unique.map((id) => `'${id.replace(/[^0-9a-f]/g, '')}'`).join(', ');
      list = await fossilCommits(ctx.dir, `b.uuid in (${ids})`, unique.length);
      break;
    }
  }
  return new Map(list.map((c) => [c.id, c]));
}

/** Git and Fossil: one `push` event per branch whose head moved, with the commits it gained. */
async function branchEvents(
  ctx: PushContext,
  before: Snapshot,
  after: Snapshot,
  gained: (head: string, branch: string) => Promise<{ commits: CommitInfo[]; total: number }>,
): Promise<PushEvent[]> {
  const events: PushEvent[] = [];
  for (const [branch, head] of after.branches) {
    const old = before.branches.get(branch);
    if (old === head) continue;
    const { commits, total } = await gained(head, branch);
    const ref = {
      ref: branch,
      refType: 'branch' as const,
      isDefault: branch === ctx.defaultBranch,
      before: old ?? '',
      after: head,
      created: old === undefined,
    };
    events.push({ type: 'push', commit: head, branch, payload: pushPayload(ctx, ref, commits, total) });
  }
  return events;
}

/** Compares two snapshots and builds the spec's `push` and `tag` events, newest commits first. */
export async function pushEvents(ctx: PushContext, before: Snapshot, after: Snapshot): Promise<PushEvent[]> {
  const events: PushEvent[] = [];
  switch (ctx.vcs) {
    case 'git':
      events.push(
        ...(await branchEvents(ctx, before, after, async (head) => {
          const { ids, total } = await gitNewIds(ctx.dir, head, before);
          return { commits: await gitCommits(ctx.dir, ids), total };
        })),
      );
      break;
    case 'hg': {
      const fresh = `${before.mark + 1}:`;
      const covered: string[] = [];
      for (const [bm, node] of after.bookmarks) {
        const old = before.bookmarks.get(bm);
        if (old === node) continue;
        const revset = `reverse(ancestors(${node}) and ${fresh})`;
        covered.push(`ancestors(${node})`);
        // A bookmark moved onto changesets the repository already had: no new commits (and
        // `N:` past the tip would be an unknown revision).
        const gainedAny = after.mark > before.mark;
        const commits = gainedAny ? await hgCommits(ctx.dir, revset, MAX_COMMITS) : [];
        const total = commits.length < MAX_COMMITS ? commits.length : await hgCount(ctx.dir, revset);
        events.push({
          type: 'push',
          commit: node,
          branch: bm,
          payload: pushPayload(
            ctx,
            {
              ref: bm,
              refType: 'bookmark',
              isDefault: bm === '@',
              before: old === undefined ? '' : before.tip,
              after: after.tip,
              created: old === undefined,
            },
            commits,
            total,
          ),
        });
      }
      if (after.mark > before.mark) {
        const rest = `${fresh}${covered.length > 0 ? ` and not (${covered.join(' or ')})` : ''}`;
        for (const [branch] of await hgBranchOf(ctx.dir, rest)) {
          const revset = `reverse((${rest}) and branch(${JSON.stringify(`literal:${branch}`)}))`;
          const commits = await hgCommits(ctx.dir, revset, MAX_COMMITS);
          const total = commits.length < MAX_COMMITS ? commits.length : await hgCount(ctx.dir, revset);
          const existed = before.branches.has(branch);
          events.push({
            type: 'push',
            commit: commits[0]?.id ?? after.tip,
            branch,
            payload: pushPayload(
              ctx,
              {
                ref: branch,
                refType: 'branch',
                isDefault: branch === 'default',
                before: existed ? before.tip : '',
                after: after.tip,
                created: !existed,
              },
              commits,
              total,
            ),
          });
        }
      }
      break;
    }
    case 'fossil':
      events.push(
        ...(await branchEvents(ctx, before, after, async (_head, branch) => {
          const { c, total } = await fossilNewCommits(ctx.dir, branch, before.mark);
          return { commits: c, total };
        })),
      );
      break;
  }
  events.push(...(await tagEvents(ctx, before, after)));
  return events;
}

/** One file's content at a commit, or undefined when the commit has no such file. */
export async function fileAt(
  vcs: VcsKind,
  dir: string,
  rev: string,
  file: string,
): Promise<string | undefined> {
  const args: Record<VcsKind, [string, string[]]> = {
    git: ['git', ['-C', dir, 'show', `${rev}:${file}`]],
    // `path:` makes the file relative to the repository root, not the working directory
    hg: [HG, ['-R', dir, 'cat', '-r', rev, `path:${file}`]],
    fossil: ['fossil', ['cat', '-R', dir, '-r', rev, file]],
  };
  const [cmd, a] = args[vcs];
  return out(cmd, a).catch(() => undefined);
}
