/**
 * The contents reads of bench/contents.ts (a file, directories, log pages of 30, a changeset with
 * diff, a file at an old revision) on two servers side by side, each read measured on one and
 * then the other: warm-up requests, then sequential measured requests (anonymous, node:http with
 * keep-alive, the body parsed as JSON), as bench:contents measures them.
 */
import http from 'node:http';
import type { VcsKind } from '../../src/vcs/index.ts';
import { PROTOCOL_VERSION, VERSION_HEADER } from '../../src/vcs/remote/wire.ts';

export type Stat = { p50: number; p99: number };

/** p50 and p99 of `iterations` sequential calls of `fn`, after `warmup` calls. */
export async function measure(
  fn: (i: number) => Promise<unknown>,
  iterations: number,
  warmup: number,
): Promise<Stat> {
  for (let i = 0; i < warmup; i++) await fn(i);
  const t: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const s = performance.now();
    await fn(i);
    t.push(performance.now() - s);
  }
  t.sort((a, b) => a - b);
  const pick = (q: number) => t[Math.min(t.length - 1, Math.floor(q * t.length))] ?? NaN;
  return { p50: pick(0.5), p99: pick(0.99) };
}

export type Reader = {
  read: (p: string) => Promise<Record<string, any>>;
  close: () => void;
};

/** Anonymous GETs of the API at `base` on one keep-alive connection, the JSON body parsed. */
export function reader(base: string): Reader {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const read = (p: string): Promise<Record<string, any>> =>
    new Promise((resolve, reject) => {
      const req = http.get(`${base}${p}`, { agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`GET ${p}: ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text) as Record<string, any>);
        });
      });
      req.on('error', reject);
    });
  return { read, close: () => agent.destroy() };
}

export const FILE = 'pkg3/mod4.txt';
export const DIR = 'pkg3';

export type ReadCase = { kind: string; path: (i: number) => string };

/**
 * The reads of repository `rb` (`/api/v1/repos/<org>/<name>`, the same repository on both
 * servers): revisions of recent history (changesets) and of deep history (old files), 200
 * distinct each, so no read is served twice in a row from one cache entry.
 */
export async function readCases(read: Reader['read'], rb: string): Promise<ReadCase[]> {
  const ids = async (q: string) => ((await read(`${rb}/log?${q}`)).data as { id: string }[]).map((e) => e.id);
  const recent = [...(await ids('per_page=100&page=2')), ...(await ids('per_page=100&page=3'))];
  const total = Number((await read(`${rb}/log?per_page=1`)).pagination.total);
  const deepPage = (share: number) => Math.floor((total * share) / 100) + 1;
  const deep = [
    ...(await ids(`per_page=100&page=${deepPage(0.6)}`)),
    ...(await ids(`per_page=100&page=${deepPage(0.9)}`)),
  ];
  const at = (list: string[], i: number) => list[i % list.length] ?? '';
  return [
    { kind: `file (${FILE})`, path: () => `${rb}/blob/${FILE}` },
    { kind: `directory (${DIR}, 10 files)`, path: () => `${rb}/tree/${DIR}` },
    { kind: 'directory (root, 20 dirs + files)', path: () => `${rb}/tree` },
    { kind: 'log page of 30 (tip)', path: () => `${rb}/log?per_page=30` },
    { kind: 'log page of 30 (page 200)', path: () => `${rb}/log?per_page=30&page=200` },
    { kind: 'changeset with diff (200 distinct)', path: (i) => `${rb}/changeset/${at(recent, i)}` },
    {
      kind: 'file at an old revision (200 distinct, 6,000-9,000 commits back)',
      path: (i) => `${rb}/blob/${FILE}?rev=${at(deep, i)}`,
    },
  ];
}

export type ReadRow = {
  vcs: VcsKind;
  kind: string;
  local: Stat;
  node: Stat;
  /** Internal requests the node served per measured read, and its own time per read (ms). */
  calls: number;
  nodeMs: number;
  /** CPU ms per read: the in-process server's tree; the nodes-mode server's and the node's. */
  cpu: { local: number; server: number; node: number };
};

/** The node's internal requests so far (count and seconds), from its metrics text. */
export type NodeCounter = () => Promise<{ count: number; seconds: number }>;

/** CPU ms used so far by a process tree. */
export type CpuClock = () => Promise<number>;

/**
 * Each read of `cases` on the in-process server (`local`) and then through the node (`remote`);
 * `counter` tells what the node served during the measured requests of the remote side, the
 * clocks what each process tree used.
 */
export async function compareReads(o: {
  vcs: VcsKind;
  cases: ReadCase[];
  local: Reader;
  remote: Reader;
  counter: NodeCounter;
  clocks: { local: CpuClock; server: CpuClock; node: CpuClock };
  iterations: number;
  warmup: number;
  log: (row: ReadRow) => void;
}): Promise<ReadRow[]> {
  const rows: ReadRow[] = [];
  const per = (a: number, b: number) => (b - a) / o.iterations;
  for (const c of o.cases) {
    for (let i = 0; i < o.warmup; i++) await o.local.read(c.path(i));
    const l0 = await o.clocks.local();
    const local = await measure((i) => o.local.read(c.path(i)), o.iterations, 0);
    const l1 = await o.clocks.local();
    for (let i = 0; i < o.warmup; i++) await o.remote.read(c.path(i));
    const before = await o.counter();
    const [s0, n0] = [await o.clocks.server(), await o.clocks.node()];
    const node = await measure((i) => o.remote.read(c.path(i)), o.iterations, 0);
    const [s1, n1] = [await o.clocks.server(), await o.clocks.node()];
    const after = await o.counter();
    const row: ReadRow = {
      vcs: o.vcs,
      kind: c.kind,
      local,
      node,
      calls: (after.count - before.count) / o.iterations,
      nodeMs: ((after.seconds - before.seconds) * 1000) / o.iterations,
      cpu: { local: per(l0, l1), server: per(s0, s1), node: per(n0, n1) },
    };
    rows.push(row);
    o.log(row);
  }
  return rows;
}

/**
 * Requests straight to the node as a server sends them (keep-alive, the secret and the protocol
 * version): `POST /internal/v1/call` of reader `method` on `repo` (`<id>.<kind>`), or with no
 * `method` a `GET` of `path` (the probes, `/internal/v1/locks`). What each request of a read
 * costs beyond the node's own time.
 */
export function nodeRequest(o: {
  node: string;
  secret: string;
  path?: string;
  repo?: string;
  kind?: VcsKind;
  method?: string;
  args?: unknown[];
}): Reader {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const body =
    o.method === undefined
      ? undefined
      : Buffer.from(
          JSON.stringify({
            repo: o.repo,
            kind: o.kind,
            target: 'reader',
            method: o.method,
            args: o.args ?? [],
          }),
        );
  const read = (): Promise<Record<string, any>> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        `${o.node}${body === undefined ? (o.path ?? '/healthz') : '/internal/v1/call'}`,
        {
          method: body === undefined ? 'GET' : 'POST',
          agent,
          headers: {
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            authorization: `Bearer ${o.secret}`,
            [VERSION_HEADER]: PROTOCOL_VERSION,
          },
        },
      );
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const out = body === undefined ? { text } : (JSON.parse(text) as Record<string, any>);
          if (res.statusCode !== 200 || out.error !== undefined)
            reject(new Error(`${o.method ?? o.path}: ${res.statusCode} ${text.slice(0, 300)}`));
          else resolve(out);
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  return { read, close: () => agent.destroy() };
}

export type CallRow = {
  /** `-` for a request that names no repository. */
  vcs: VcsKind | '-';
  call: string;
  /** The reader's call in this process (what the in-process server waits for); none for a probe. */
  alone: Stat | undefined;
  /** The same call sent to the node, and the node's own time per call (ms). */
  viaNode: Stat;
  nodeMs: number;
};

/** One reader call alone (`inProcess`) and as an internal request to the node (`remote`). */
export async function compareCall(o: {
  vcs: VcsKind | '-';
  call: string;
  inProcess: (() => Promise<unknown>) | undefined;
  remote: Reader;
  counter: NodeCounter;
  iterations: number;
  warmup: number;
}): Promise<CallRow> {
  const alone = o.inProcess === undefined ? undefined : await measure(o.inProcess, o.iterations, o.warmup);
  for (let i = 0; i < o.warmup; i++) await o.remote.read('');
  const before = await o.counter();
  const viaNode = await measure(() => o.remote.read(''), o.iterations, 0);
  const after = await o.counter();
  const nodeMs = ((after.seconds - before.seconds) * 1000) / (after.count - before.count);
  return { vcs: o.vcs, call: o.call, alone, viaNode, nodeMs };
}
