/**
 * Storage nodes against the in-process default, side by side in one run on the 10,000-commit
 * repositories of bench/contents.ts (bench/repos.ts, generated once under bench/.work/contents):
 *
 * 1. Contents reads (those of bench:contents) through a server in the default mode
 *    (`TRIAD_STORAGE=local`, the repositories copied into its repository directory) and through a
 *    server in `TRIAD_STORAGE=nodes` mode with one storage node on loopback (copied into the
 *    node's directory as `<id>.<kind>`, the row's `storage_node` set in SQL): p50/p99 of each and
 *    the difference; targets p50 +0.5 ms, p99 +10 ms.
 * 2. A full clone with the stock client and a push of five new commits, on both (target: at most
 *    1.1× the in-process time).
 * 3. The backup's cost per push: five-commit pushes through the nodes-mode server to a node
 *    without a blob store and to a node backing up to MinIO, and the bytes put per push (the
 *    node's `/metrics`).
 *
 * Every process is started by this script on loopback (embedded PostgreSQL with one database per
 * server, servers and nodes as `node src/cli.ts serve|storage`, MinIO from `npm run tools`) and
 * stopped at its end, with its temporary directory. The tables go to bench/README.md (section
 * "Storage nodes").
 *
 *   npm run bench:storage [-- --iterations 300 --clone-runs 5 --push-runs 9 --backup-pushes 10]
 *                         [--only reads,transport,backup] [--kinds git,hg,fossil] [--no-record]
 *                         [--cpu-prof DIR]
 *
 * Only a run of every part and kind is recorded.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createVcs, type VcsKind } from '../src/vcs/index.ts';
import { ProcessPool } from '../src/vcs/process/pool.ts';
import { startMinio, type MinioServer } from '../test/helpers/minio.ts';
import { generateRepos } from './repos.ts';
import { treeCpuMs } from './lib/cpu.ts';
import { apiCaller, registerGenerated, startServerProcess, type ServerProcess } from './lib/server.ts';
import {
  nodeCounter,
  registerOnNode,
  startDatabases,
  startNodeProcess,
  type BenchDatabases,
  type NodeProcess,
} from './lib/storage-setup.ts';
import {
  compareCall,
  compareReads,
  nodeRequest,
  readCases,
  reader,
  type CallRow,
  type ReadRow,
  type Reader,
} from './lib/storage-reads.ts';
import type { Target } from './lib/storage-transport.ts';
import { compareTransport } from './lib/storage-compare.ts';
import { measureBackup, type BackupRow } from './lib/storage-backup.ts';
import { recordSection, type RequestRow, type TransportRow } from './lib/storage-record.ts';

const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    iterations: { type: 'string', default: '300' },
    warmup: { type: 'string', default: '200' },
    'clone-runs': { type: 'string', default: '5' },
    'push-runs': { type: 'string', default: '9' },
    'backup-pushes': { type: 'string', default: '10' },
    only: { type: 'string', default: 'reads,transport,backup' },
    kinds: { type: 'string', default: 'git,hg,fossil' },
    'no-record': { type: 'boolean', default: false },
    /** A directory for V8 CPU profiles of both servers and node-a (`--cpu-prof`), written at their exit. */
    'cpu-prof': { type: 'string' },
  },
});
const COMMITS = Number(values.commits);
const ITERATIONS = Number(values.iterations);
const WARMUP = Number(values.warmup);
const CLONE_RUNS = Number(values['clone-runs']);
const PUSH_RUNS = Number(values['push-runs']);
const BACKUP_PUSHES = Number(values['backup-pushes']);
const ONLY = new Set(values.only.split(','));
const KINDS = (['git', 'hg', 'fossil'] as const).filter((k) => values.kinds.split(',').includes(k));
const WORK = path.join(import.meta.dirname, '.work', 'contents', String(COMMITS));
const NAMES: Record<VcsKind, string> = { git: 'g', hg: 'h', fossil: 'f' };
const ORG = 'bench';
const f2 = (n: number) => n.toFixed(2);
const PROF = values['cpu-prof'] === undefined ? undefined : path.resolve(values['cpu-prof']);
const profArgs = (name: string) =>
  PROF === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${PROF}`, `--cpu-prof-name=${name}.cpuprofile`];

const repos = await generateRepos(WORK, COMMITS);
const started = new Date();
const load = os.loadavg()[0] ?? 0;
let loadEnd: number | undefined;
const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-storage-'));
const secret = randomBytes(24).toString('hex');
const closers: (() => Promise<void>)[] = [];
const readers: Reader[] = [];
let dbs: BenchDatabases | undefined;
let minio: MinioServer | undefined;
const readRows: ReadRow[] = [];
const callRows: CallRow[] = [];
const transportRows: TransportRow[] = [];
const requestRows: RequestRow[] = [];
const backupRows: BackupRow[] = [];

/** `node src/cli.ts serve` on database `db` with `env`, its spool under the run's directory. */
async function server(name: string, db: string, env: Record<string, string>): Promise<ServerProcess> {
  const spool = path.join(tmp, `${name}-spool`);
  await fs.mkdir(spool);
  const s = await startServerProcess(
    name,
    { DATABASE_URL: db, TRIAD_TRANSPORT_SPOOL_DIR: spool, ...env },
    profArgs(name),
  );
  closers.push(s.close);
  return s;
}

async function node(name: string, db: string, env: Record<string, string> = {}): Promise<NodeProcess> {
  const dir = path.join(tmp, name);
  const n = await startNodeProcess({ name, dir, databaseUrl: db, secret, env, nodeArgs: profArgs(name) });
  closers.push(n.close);
  return n;
}

try {
  dbs = await startDatabases(tmp);
  const localDb = await dbs.create('bench_local');
  const nodesDb = await dbs.create('bench_nodes');
  const local = await server('storage-local', localDb, { TRIAD_STORAGE: 'local' });
  const nodeA = await node('node-a', nodesDb);
  const remote = await server('storage-nodes', nodesDb, {
    TRIAD_STORAGE: 'nodes',
    TRIAD_STORAGE_SECRET: secret,
  });
  const localApi = apiCaller(local.url, local.token);
  const remoteApi = apiCaller(remote.url, remote.token);
  const sql = (text: string, v: unknown[]) => dbs!.sql('bench_nodes', text, v);
  await localApi('POST', '/api/v1/orgs', { name: ORG });
  await remoteApi('POST', '/api/v1/orgs', { name: ORG });
  const ids = { local: {} as Record<VcsKind, number>, node: {} as Record<VcsKind, number> };
  for (const vcs of KINDS) {
    const name = NAMES[vcs];
    ids.local[vcs] = await registerGenerated(local, localApi, ORG, name, vcs, repos[vcs]);
    ids.node[vcs] = await registerOnNode({
      server: remote,
      api: remoteApi,
      org: ORG,
      name,
      vcs,
      from: repos[vcs],
      node: nodeA,
      sql,
    });
  }
  const target = (s: ServerProcess, name: string): Target => ({
    base: s.url,
    org: ORG,
    name,
    token: s.token,
  });

  // ---------------------------------------------------------------- 1. reads
  if (ONLY.has('reads')) {
    const l = reader(local.url);
    const r = reader(remote.url);
    readers.push(l, r);
    // each API path warmed once before the first row, as bench:contents does
    const first = `/api/v1/repos/${ORG}/${NAMES[KINDS[0] ?? 'git']}/tree`;
    for (let i = 0; i < 300; i++) await l.read(first);
    for (let i = 0; i < 300; i++) await r.read(first);
    for (const vcs of KINDS) {
      const cases = await readCases(l.read, `/api/v1/repos/${ORG}/${NAMES[vcs]}`);
      const rows = await compareReads({
        vcs,
        cases,
        local: l,
        remote: r,
        counter: nodeCounter(nodeA),
        clocks: {
          local: () => treeCpuMs(local.child.pid),
          server: () => treeCpuMs(remote.child.pid),
          node: () => treeCpuMs(nodeA.child.pid),
        },
        iterations: ITERATIONS,
        warmup: WARMUP,
        log: (x) =>
          console.log(
            `${x.vcs.padEnd(7)} ${x.kind.padEnd(66)} local p50=${f2(x.local.p50)} p99=${f2(x.local.p99)}` +
              `  node p50=${f2(x.node.p50)} p99=${f2(x.node.p99)} ms  (${x.calls.toFixed(1)} node requests, ${f2(x.nodeMs)} ms in the node;` +
              ` CPU ms/read ${f2(x.cpu.local)} in-process, ${f2(x.cpu.server)} + ${f2(x.cpu.node)} server + node)`,
          ),
      });
      readRows.push(...rows);
    }
    // What one node request costs: the node's HTTP alone (`/healthz`), with the secret checked
    // and a JSON answer (`/internal/v1/locks`), then reader calls, each also run in this process
    // (a small answer, and the largest of the reads).
    const here = createVcs({ pool: new ProcessPool(), tmpDir: path.join(tmp, 'vcs') });
    closers.push(() => here.close(2000));
    const probes: [string, string][] = [
      ['GET /healthz', '/healthz'],
      ['GET /internal/v1/locks', 'locks'],
    ];
    for (const [call, route] of probes) {
      const where = route.startsWith('/') ? route : `/internal/v1/${route}`;
      await callRow('-', call, undefined, { path: where }, route);
    }
    for (const vcs of KINDS) {
      const rb = `/api/v1/repos/${ORG}/${NAMES[vcs]}`;
      const id = ((await l.read(`${rb}/log?per_page=1&page=150`)).data as { id: string }[])[0]?.id ?? '';
      const alone = here.reader(vcs, local.storePath(ids.local[vcs], vcs)) as unknown as Record<
        string,
        (...a: unknown[]) => Promise<unknown>
      >;
      const calls: [string, string, unknown[]][] = [
        ["resolve('tip')", 'resolve', ['tip']],
        ['changeset(<id>)', 'changeset', [id]],
      ];
      for (const [call, method, args] of calls) {
        const repo = `${ids.node[vcs]}.${vcs}`;
        await callRow(vcs, call, () => alone[method]!(...args), { repo, kind: vcs, method, args }, 'call');
      }
    }
  }

  /** One row of the node request table: `inProcess` here, `req` sent to node-a. */
  async function callRow(
    vcs: VcsKind | '-',
    call: string,
    inProcess: (() => Promise<unknown>) | undefined,
    req: Omit<Parameters<typeof nodeRequest>[0], 'node' | 'secret'>,
    route: string,
  ): Promise<void> {
    const remoteCall = nodeRequest({ node: nodeA.url, secret, ...req });
    readers.push(remoteCall);
    const row = await compareCall({
      vcs,
      call,
      inProcess,
      remote: remoteCall,
      counter: nodeCounter(nodeA, route),
      iterations: ITERATIONS,
      warmup: WARMUP,
    });
    callRows.push(row);
    const a =
      row.alone === undefined ? '' : `in this process p50=${f2(row.alone.p50)} p99=${f2(row.alone.p99)}  `;
    console.log(
      `${vcs.padEnd(7)} ${call.padEnd(24)} ${a}to the node p50=${f2(row.viaNode.p50)} p99=${f2(row.viaNode.p99)} ms` +
        ` (${f2(row.nodeMs)} ms in the node)`,
    );
  }

  // ---------------------------------------------------------------- 2. clone and push
  if (ONLY.has('transport')) {
    for (const vcs of KINDS) {
      const out = await compareTransport({
        vcs,
        a: target(local, NAMES[vcs]),
        b: target(remote, NAMES[vcs]),
        from: repos[vcs],
        work: tmp,
        cloneRuns: CLONE_RUNS,
        pushRuns: PUSH_RUNS,
        commits: COMMITS,
        counter: (route) => nodeCounter(nodeA, route),
      });
      if (out.request !== undefined) {
        const r = out.request;
        requestRows.push(r);
        console.log(
          `${vcs}: ${r.request}: in-process p50=${f2(r.local.p50)} p99=${f2(r.local.p99)}, ` +
            `via node p50=${f2(r.node.p50)} p99=${f2(r.node.p99)} ms (${f2(r.nodeMs)} ms in the node)`,
        );
      }
      transportRows.push(...out.rows);
      for (const x of out.rows)
        console.log(
          `${vcs}: ${x.step}: in-process ${f2(x.local)} s (CPU ${f2(x.localCpu)} s), ` +
            `via node ${f2(x.node)} s (CPU ${f2(x.nodeCpu)} s): ${f2(x.node / x.local)}×; ` +
            `${x.nodeRequests.toFixed(1)} node requests (${x.backendRequests.toFixed(1)} backend), ` +
            `${f2(x.nodeSeconds)} s in the node`,
        );
    }
  }

  // ---------------------------------------------------------------- 3. backups
  if (ONLY.has('backup')) {
    minio = await startMinio();
    const nodeB = await node('node-b', nodesDb, {
      TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
      TRIAD_S3_ACCESS_KEY: minio.accessKey,
      TRIAD_S3_SECRET_KEY: minio.secretKey,
      TRIAD_S3_BUCKET: 'bench-backups',
    });
    for (const vcs of KINDS) {
      const row = await measureBackup({
        vcs,
        from: repos[vcs],
        stem: NAMES[vcs],
        org: ORG,
        server: remote,
        api: remoteApi,
        sql,
        plain: nodeA,
        backing: nodeB,
        pushes: BACKUP_PUSHES,
        work: tmp,
      });
      backupRows.push(row);
      console.log(
        `${vcs}: five-commit push, backups off ${f2(row.off)} s, on ${f2(row.on)} s; ` +
          `${row.backupsPerPush.toFixed(1)} backups and ${(row.bytesPerPush / 1024).toFixed(1)} KiB per push, ` +
          `${(row.backupSeconds * 1000).toFixed(0)} ms backing up; first backup ${(row.firstBytes / 1048576).toFixed(1)} MiB`,
      );
      const w = row.writerClone;
      if (w !== undefined)
        console.log(
          `${vcs}: clone by a token that may write, backups off ${f2(w.off)} s, on ${f2(w.on)} s; ` +
            `${w.backups} backups, ${f2(w.seconds)} s backing up, ${(w.bytes / 1048576).toFixed(1)} MiB put`,
        );
    }
  }
} finally {
  loadEnd = os.loadavg()[0] ?? 0;
  for (const r of readers) r.close();
  for (const close of closers.reverse()) await close().catch((e: unknown) => console.error(e));
  await minio?.stop();
  await dbs?.stop();
  await fs.rm(tmp, { recursive: true, force: true });
}

const everything = ['reads', 'transport', 'backup'].every((p) => ONLY.has(p)) && KINDS.length === 3;
if (!values['no-record'] && !everything) console.log('not recorded: only a run of every part and kind is');
if (!values['no-record'] && everything)
  await recordSection({
    started,
    load,
    loadEnd: loadEnd ?? load,
    commits: COMMITS,
    iterations: ITERATIONS,
    warmup: WARMUP,
    cloneRuns: CLONE_RUNS,
    pushRuns: PUSH_RUNS,
    reads: readRows,
    calls: callRows,
    transport: transportRows,
    requests: requestRows,
    backups: backupRows,
  });
