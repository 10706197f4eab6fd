/**
 * The "Storage nodes" section of bench/README.md, written by bench/storage-nodes.ts between its
 * markers (the reading of a run goes after the end marker, by hand).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as prettier from 'prettier';
import type { VcsKind } from '../../src/vcs/index.ts';
import type { BackupRow } from './storage-backup.ts';
import type { CallRow, ReadRow, Stat } from './storage-reads.ts';

export type TransportRow = {
  vcs: VcsKind;
  step: string;
  runs: number;
  /** Median seconds, wall-clock and CPU of the benchmark's process tree. */
  local: number;
  node: number;
  localCpu: number;
  nodeCpu: number;
  /** Mean internal requests node-a served per step through the nodes-mode server, and its time. */
  nodeRequests: number;
  /** Of those, clone URL requests (`/internal/v1/backend`); the others are driver and reader calls. */
  backendRequests: number;
  nodeSeconds: number;
};

/** One small clone URL request, p50/p99 on each server, and the node's own time (ms). */
export type RequestRow = { vcs: VcsKind; request: string; local: Stat; node: Stat; nodeMs: number };

export type Run = {
  started: Date;
  load: number;
  /** At the end of the measurements. */
  loadEnd: number;
  commits: number;
  iterations: number;
  warmup: number;
  cloneRuns: number;
  pushRuns: number;
  reads: ReadRow[];
  calls: CallRow[];
  transport: TransportRow[];
  requests: RequestRow[];
  backups: BackupRow[];
};

const f = (n: number, d = 2) => n.toFixed(d);
const sign = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(2)}`;

function readTable(rows: ReadRow[]): string {
  if (rows.length === 0) return 'Reads were not measured in this run.';
  const worst = (pick: (r: ReadRow) => number) => Math.max(...rows.map(pick));
  return [
    '| VCS | Read | In-process p50 (ms) | p99 (ms) | Via node p50 (ms) | p99 (ms) | Overhead p50 (ms) | Overhead p99 (ms) | Node requests per read | In the node (ms) | CPU in-process (ms) | CPU server + node (ms) |',
    '| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | ${r.kind} | ${f(r.local.p50)} | ${f(r.local.p99)} | ${f(r.node.p50)} | ${f(r.node.p99)} | ${sign(r.node.p50 - r.local.p50)} | ${sign(r.node.p99 - r.local.p99)} | ${f(r.calls, 1)} | ${f(r.nodeMs)} | ${f(r.cpu.local)} | ${f(r.cpu.server)} + ${f(r.cpu.node)} |`,
    ),
    '',
    `Largest overhead: p50 ${sign(worst((r) => r.node.p50 - r.local.p50))} ms (target <= 0.5 ms), ` +
      `p99 ${sign(worst((r) => r.node.p99 - r.local.p99))} ms (target <= 10 ms).`,
  ].join('\n');
}

function callTable(rows: CallRow[]): string {
  if (rows.length === 0) return '';
  return [
    '| VCS | Reader call | In this process p50 (ms) | p99 (ms) | Sent to the node p50 (ms) | p99 (ms) | In the node (ms) |',
    '| --- | --- | --: | --: | --: | --: | --: |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | \`${r.call}\` | ${r.alone === undefined ? '' : f(r.alone.p50)} | ${r.alone === undefined ? '' : f(r.alone.p99)} | ${f(r.viaNode.p50)} | ${f(r.viaNode.p99)} | ${f(r.nodeMs)} |`,
    ),
  ].join('\n');
}

function transportTable(rows: TransportRow[]): string {
  if (rows.length === 0) return 'Clones and pushes were not measured in this run.';
  return [
    '| VCS | Step | Runs | In-process (s) | Via node (s) | Ratio | In-process CPU (s) | Via node CPU (s) | Node requests (backend + calls) | In the node (s) |',
    '| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | ${r.step} | ${r.runs} | ${f(r.local)} | ${f(r.node)} | ${f(r.node / r.local)} | ${f(r.localCpu)} | ${f(r.nodeCpu)} | ${f(r.nodeRequests, 1)} (${f(r.backendRequests, 1)} + ${f(r.nodeRequests - r.backendRequests, 1)}) | ${f(r.nodeSeconds)} |`,
    ),
  ].join('\n');
}

function requestTable(rows: RequestRow[]): string {
  if (rows.length === 0) return '';
  return [
    '| VCS | Clone URL request | In-process p50 (ms) | p99 (ms) | Via node p50 (ms) | p99 (ms) | Overhead p50 (ms) | In the node (ms) |',
    '| --- | --- | --: | --: | --: | --: | --: | --: |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | \`${r.request}\` | ${f(r.local.p50)} | ${f(r.local.p99)} | ${f(r.node.p50)} | ${f(r.node.p99)} | ${sign(r.node.p50 - r.local.p50)} | ${f(r.nodeMs)} |`,
    ),
  ].join('\n');
}

function backupTable(rows: BackupRow[]): string {
  if (rows.length === 0) return 'Backups were not measured in this run.';
  const clones = rows.flatMap((r) =>
    r.writerClone === undefined
      ? []
      : [
          `${r.vcs}: a clone by a token that may write took ${f(r.writerClone.off)} s from the node without ` +
            `backups and ${f(r.writerClone.on)} s from the one with; the latter ran ${r.writerClone.backups} ` +
            `backups meanwhile (${f(r.writerClone.seconds)} s, ${f(r.writerClone.bytes / 1048576, 1)} MiB put).`,
        ],
  );
  return [
    '| VCS | Pushes | Backups off (s) | Backups on (s) | Added (s) | Backups per push | Backup time per push (s) | Put per push (KiB) | First backup after the copy (MiB) |',
    '| --- | --: | --: | --: | --: | --: | --: | --: | --: |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | ${r.pushes} | ${f(r.off)} | ${f(r.on)} | ${sign(r.on - r.off)} | ${f(r.backupsPerPush, 1)} | ${f(r.backupSeconds)} | ${f(r.bytesPerPush / 1024, 1)} | ${f(r.firstBytes / 1048576, 1)} |`,
    ),
    ...(clones.length === 0 ? [] : ['', ...clones]),
  ].join('\n');
}

export async function recordSection(run: Run): Promise<void> {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const section = `<!-- bench:storage:start -->

## Storage nodes (\`npm run bench:storage\`)

Targets (storage nodes issue), measured side by side in one run: reads through a storage node at
most 0.5 ms (p50) and 10 ms (p99) above the in-process default; a clone and a push through a node
at most 1.1× the in-process time for each kind; and what a node's backups add to a push.
\`bench/storage-nodes.ts\` takes the ${run.commits.toLocaleString('en')}-commit repositories of
\`bench/contents.ts\` (\`bench/repos.ts\`, kept under \`bench/.work/contents/\`), starts an embedded
PostgreSQL with one database per server, and as processes of their own: a server in the default
mode (\`TRIAD_STORAGE=local\`, the repositories copied into its repository directory), a storage
node \`node-a\` (\`node src/cli.ts storage\`, no blob store) and a server in
\`TRIAD_STORAGE=nodes\` mode; each repository is registered through the API on both servers, copied
into the node's directory as \`<id>.<kind>\`, and its row's \`storage_node\` set in SQL. Everything
is on loopback; both servers are up during the whole run and each measurement alternates between
them.

1. **Reads**: the reads of bench:contents (anonymous, node:http with keep-alive, the JSON parsed),
   each API path warmed with 300 tree reads first, then per read ${run.warmup} warm-up and
   ${run.iterations} measured sequential requests on the in-process server, then the same on the
   nodes-mode server. The node's own \`triad_storage_request_duration_seconds\` (its \`/metrics\`)
   gives the internal requests each read made and the node's time in them (from the request's
   arrival to its answer written, the reader's work included); the CPU columns are each process
   tree's CPU time per read (Linux \`/proc\`, readers and backends included; PostgreSQL, the same
   for both, left out). A second table takes one node request apart: the node's HTTP alone
   (\`/healthz\`), with the secret checked and a JSON answer (\`/internal/v1/locks\`), and two reader
   calls sent straight to the node as a server sends them, next to the same call on a reader in the
   benchmark's own process.
2. **Clone and push** (medians; CPU is the benchmark's whole process tree, clients included): an
   anonymous full clone with the stock client (\`git clone --bare\`, \`hg clone -U\`,
   \`fossil clone\`), and a push of five new small commits from a working copy of the same history
   (git and hg with the token in the URL, Fossil with \`-B\`); the server that goes first alternates.
   "Node requests" counts what the node served per step: clone URL requests (\`backend\`) and
   driver or reader calls (a push's snapshots, ref moves and bookkeeping). Then one small clone
   URL request alone (100 sequential, keep-alive): git's ref advertisement, Mercurial's
   capabilities.
3. **Backups**: a second node \`node-b\` with \`TRIAD_S3_*\` pointing at a MinIO on loopback
   (\`npm run tools\`); per kind two more copies of the repository, one on each node, receive the
   same five-commit pushes through the nodes-mode server (after one untimed push each: the first
   backup after the copy puts the whole history). The node's \`triad_storage_backup_bytes_total\`
   and \`triad_storage_backup_duration_seconds\` give what each push put and how long the backup
   took (the node backs up before it answers the push). For Fossil also one clone by a token that
   may write from each (Fossil cannot tell a clone from a push: its round trips go the push path).

Recorded ${run.started.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${cpu} (${os.cpus().length} CPUs), Node ${process.version}, load average ${run.load.toFixed(1)} at the start and ${run.loadEnd.toFixed(1)} at the end.

${readTable(run.reads)}

${callTable(run.calls)}

${transportTable(run.transport)}

${requestTable(run.requests)}

${backupTable(run.backups)}

<!-- bench:storage:end -->`;
  const readme = path.join(import.meta.dirname, '..', 'README.md');
  const current = await fs.readFile(readme, 'utf8');
  const re = /<!-- bench:storage:start -->[\s\S]*<!-- bench:storage:end -->/;
  const next = re.test(current) ? current.replace(re, section) : `${current.trimEnd()}\n\n${section}\n`;
  const options = (await prettier.resolveConfig(readme)) ?? {};
  await fs.writeFile(readme, await prettier.format(next, { ...options, filepath: readme }));
  console.log('recorded in bench/README.md');
}
