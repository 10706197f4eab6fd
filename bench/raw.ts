/**
 * Issue 17 goal "A 60 MB file: raw download <= 1.5x git cat-file / hg cat / fossil cat time;
 * other reads of that repository unaffected; server RSS growth < 64 MB". For each kind: a public
 * repository whose storage gets one commit with a README and a `--mb` MB file of random bytes
 * (committed straight into the storage, as the contents tests do), then
 * - `--runs` times, alternating: the native command into /dev/null on the same storage
 *   (`git cat-file blob`, `hg cat -r tip`, `fossil cat -r tip`), the same into a pipe that `cat`
 *   empties (what writing the bytes to any reader costs the command), the floor (the same file from a
 *   minimal `node:http` server in a process of its own that holds it in memory: what any HTTP
 *   download over loopback costs here) and an anonymous
 *   `GET /api/v1/repos/bench/raw-<kind>/raw/big.bin` by `curl` (a process of its own, as a user's
 *   client is; the body to /dev/null, its length checked); each timed from spawn to exit;
 * - the server's CPU time per download (user + system of this process, which runs the server and
 *   only waits for curl meanwhile), and that of the repository's pooled reader process (a file
 *   the reader reads shows there; it should read none of it);
 * - sequential root tree reads of the same repository, idle, then while downloads run;
 * - the RSS of the process before the downloads, its peak during them and after (the server runs
 *   in this process; the clients, the reader and cat processes are separate and not included).
 *
 * The first download of each kind reads the store and is timed on its own ("first raw download"):
 * with the raw cache on (the default), the runs after it are answered from the kept file;
 * `TRIAD_RAW_CACHE_BYTES=0 npm run bench:raw` reads the store every time.
 *
 *   npm run bench:raw [-- --mb 60] [--runs 5] [--kinds git,hg,fossil]
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { apiCaller, startBenchServer } from './lib/server.ts';
import { ENV } from './repos.ts';
import type { VcsKind } from '../src/vcs/index.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '60' },
    runs: { type: 'string', default: '5' },
    kinds: { type: 'string', default: 'git,hg,fossil' },
    tree: { type: 'string', default: '30' },
  },
});
const MB = Number(values.mb);
const RUNS = Number(values.runs);
const TREE = Number(values.tree);
const KINDS = values.kinds.split(',') as VcsKind[];
const HG = '/usr/bin/hg';

const run = (cmd: string, args: string[], cwd: string) =>
  exec(cmd, args, { cwd, env: ENV, maxBuffer: 64 * 1024 * 1024 });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};
const rssMb = () => process.memoryUsage().rss / 1024 / 1024;
const gc = () => (globalThis as { gc?: () => void }).gc?.();

/** One commit with README.md and big.bin into the stored repository `store`. */
async function populate(kind: VcsKind, store: string, work: string, big: string): Promise<void> {
  await fs.mkdir(work, { recursive: true });
  const write = async () => {
    await fs.writeFile(path.join(work, 'README.md'), 'raw download benchmark\n');
    await fs.copyFile(big, path.join(work, 'big.bin'));
  };
  if (kind === 'git') {
    await run('git', ['init', '-q', '-b', 'main', '.'], work);
    await write();
    await run('git', ['add', '.'], work);
    await run(
      'git',
      ['-c', 'user.name=Bench', '-c', 'user.email=b@example.test', 'commit', '-q', '-m', 'big'],
      work,
    );
    await run('git', ['push', '-q', store, 'main'], work);
  } else if (kind === 'hg') {
    await run(HG, ['init', '.'], work);
    await write();
    await run(HG, ['add', '-q'], work);
    await run(HG, ['commit', '-u', 'bench', '-m', 'big'], work);
    await run(HG, ['push', '-q', store], work);
  } else {
    await run('fossil', ['open', '--force', store], work);
    await run('fossil', ['user', 'default', 'triad'], work);
    await write();
    await run('fossil', ['add', '.'], work);
    await run('fossil', ['commit', '--no-warnings', '-m', 'big'], work);
    await run('fossil', ['close', '--force'], work);
  }
}

/**
 * The native read of big.bin at tip into /dev/null, in seconds; `piped`: into a pipe that `cat`
 * empties into /dev/null (what handing the bytes to any reader costs the command and the machine).
 */
async function native(kind: VcsKind, store: string, cwd: string, piped = false): Promise<number> {
  const [bin, argv]: [string, string[]] =
    kind === 'git'
      ? ['git', ['--git-dir', store, 'cat-file', 'blob', 'HEAD:big.bin']]
      : kind === 'hg'
        ? [HG, ['-R', store, 'cat', '-r', 'tip', 'big.bin']]
        : ['fossil', ['cat', '-R', store, '-r', 'tip', 'big.bin']];
  const [cmd, args] = piped ? ['/bin/sh', ['-c', '"$@" | cat', 'sh', bin, ...argv]] : [bin, argv];
  const out = await fs.open('/dev/null', 'w');
  const t = performance.now();
  try {
    await new Promise<void>((resolve, reject) => {
      // hg cat takes the path relative to the working directory: run it in the repository.
      const where = kind === 'hg' ? store : cwd;
      const child = spawn(cmd, args, {
        cwd: where,
        env: ENV,
        stdio: ['ignore', out.fd, 'inherit'],
      });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}`))));
    });
  } finally {
    await out.close();
  }
  return (performance.now() - t) / 1000;
}

/** The server's CPU time (user + system) so far, in ms: the server runs in this process. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** The pooled reader process of `store` (git cat-file --batch-command, hg serve, fossil sql). */
async function readerPid(store: string): Promise<number | undefined> {
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const args = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (!args.includes(store)) continue;
    const line = args.join(' ');
    if (/--batch-command|extensions\.triadread=|(^|\/)fossil sql/.test(line)) return Number(pid);
  }
  return undefined;
}

/** CPU time (user + system) of a process in ms, from /proc/<pid>/stat (10 ms resolution). */
async function procCpuMs(pid: number | undefined): Promise<number> {
  if (pid === undefined) return NaN;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

/** An anonymous raw download by curl, body to /dev/null and its length checked: seconds, server CPU ms. */
async function download(url: string, size: number): Promise<{ s: number; cpu: number }> {
  const cpu = cpuMs();
  const t = performance.now();
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`curl exited ${code}`))));
  });
  const elapsed = (performance.now() - t) / 1000;
  if (out !== `200 ${size}`) throw new Error(`raw: ${out}, expected 200 ${size}`);
  return { s: elapsed, cpu: cpuMs() - cpu };
}

/**
 * The floor: a minimal `node:http` server in a process of its own answering every request with
 * the file, read into memory at its start. Resolves with its URL and a stop function.
 */
async function floorServer(file: string): Promise<{ url: string; stop: () => void }> {
  const code = `
    const http = require('node:http');
    const data = require('node:fs').readFileSync(process.argv[1]);
    const server = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': data.length });
      res.end(data);
    });
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
  const child = spawn(process.execPath, ['-e', code, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (c) => reject(new Error(`floor server exited ${c}`)));
  });
  return { url: `http://127.0.0.1:${port}/big.bin`, stop: () => child.kill() };
}

async function treeRead(url: string): Promise<number> {
  const t = performance.now();
  const r = await fetch(url);
  await r.arrayBuffer();
  if (r.status !== 200) throw new Error(`tree: ${r.status}`);
  return performance.now() - t;
}

const server = await startBenchServer('raw');
const { running, token, dir } = server;
const call = apiCaller(running.url, token);
type Row = {
  kind: VcsKind;
  native: number;
  first: number;
  piped: number;
  floor: number;
  triad: number;
  cpu: number;
  readerCpu: number;
  treeIdle: number[];
  treeBusy: number[];
  rss: [number, number, number];
};
const rows: Row[] = [];
const load0 = os.loadavg();
gc();
const rssStart = rssMb();
let stopFloor = () => undefined as void;
try {
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const size = MB * 1024 * 1024;
  // Written once to a file, so that the 60 MB are not held in this process (its RSS is measured).
  const big = path.join(dir, 'big.bin');
  const out = await fs.open(big, 'w');
  for (let i = 0; i < MB; i++) await out.write(randomBytes(1024 * 1024));
  await out.close();
  const floor = await floorServer(big);
  stopFloor = floor.stop;
  for (const kind of KINDS) {
    const name = `raw-${kind}`;
    const created = await call('POST', '/api/v1/orgs/bench/repos', { name, vcs: kind });
    const store = running.services.repos.path({ id: created.data.id as number, vcs: kind });
    await populate(kind, store, path.join(dir, `work-${kind}`), big);
    const raw = `${running.url}/api/v1/repos/bench/${name}/raw/big.bin`;
    const tree = `${running.url}/api/v1/repos/bench/${name}/tree`;

    for (let i = 0; i < 10; i++) await treeRead(tree); // warm the reader
    // The first download reads the store (and fills the raw cache when it is on, in the
    // background: given a second to finish); the runs after it read what the cache keeps.
    const first = (await download(raw, size)).s;
    await new Promise((r) => setTimeout(r, 1000));
    await native(kind, store, dir);
    await download(floor.url, size);
    gc();
    const rssBefore = rssMb();
    let rssPeak = rssBefore;
    const rssTimer = setInterval(() => (rssPeak = Math.max(rssPeak, rssMb())), 20);

    const nat: number[] = [];
    const pip: number[] = [];
    const flo: number[] = [];
    const tri: number[] = [];
    const cpu: number[] = [];
    const readerCpu: number[] = [];
    const reader = await readerPid(store);
    for (let i = 0; i < RUNS; i++) {
      nat.push(await native(kind, store, dir));
      pip.push(await native(kind, store, dir, true));
      flo.push((await download(floor.url, size)).s);
      const r0 = await procCpuMs(reader);
      const d = await download(raw, size);
      readerCpu.push((await procCpuMs(reader)) - r0);
      tri.push(d.s);
      cpu.push(d.cpu);
    }
    const treeIdle: number[] = [];
    for (let i = 0; i < TREE; i++) treeIdle.push(await treeRead(tree));
    // Tree reads while downloads run back to back (at least TREE reads, at least one download).
    const treeBusy: number[] = [];
    let downloading = true;
    const downloads = (async () => {
      do await download(raw, size);
      while (treeBusy.length < TREE);
      downloading = false;
    })();
    await new Promise((r) => setTimeout(r, 50)); // the download has started
    while (downloading) treeBusy.push(await treeRead(tree));
    await downloads;
    clearInterval(rssTimer);
    gc();
    await new Promise((r) => setTimeout(r, 500));
    const row: Row = {
      kind,
      native: median(nat),
      first,
      piped: median(pip),
      floor: median(flo),
      triad: median(tri),
      cpu: median(cpu),
      readerCpu: median(readerCpu),
      treeIdle,
      treeBusy,
      rss: [rssBefore, rssPeak, rssMb()],
    };
    rows.push(row);
    console.log(
      `${kind}: native ${row.native.toFixed(3)} s [${nat.map((x) => x.toFixed(2)).join(' ')}], ` +
        `piped ${row.piped.toFixed(3)} s [${pip.map((x) => x.toFixed(2)).join(' ')}], ` +
        `floor ${row.floor.toFixed(3)} s [${flo.map((x) => x.toFixed(2)).join(' ')}], ` +
        `first raw ${first.toFixed(3)} s, raw ${row.triad.toFixed(3)} s [${tri.map((x) => x.toFixed(2)).join(' ')}], ratio ${(row.triad / row.native).toFixed(2)}; ` +
        `server CPU per download ${row.cpu.toFixed(0)} ms [${cpu.map((x) => x.toFixed(0)).join(' ')}], ` +
        `pooled reader (pid ${reader ?? '?'}) ${row.readerCpu.toFixed(0)} ms [${readerCpu.join(' ')}]; ` +
        `tree idle p50 ${pct(treeIdle, 50).toFixed(1)} max ${Math.max(...treeIdle).toFixed(1)} ms, ` +
        `during downloads (${treeBusy.length}) p50 ${pct(treeBusy, 50).toFixed(1)} max ${Math.max(...treeBusy).toFixed(1)} ms; ` +
        `RSS ${row.rss.map((x) => x.toFixed(0)).join(' -> ')} MB (before, peak, after)`,
    );
  }
  gc();
  await new Promise((r) => setTimeout(r, 1000));
  console.log(
    `RSS after server start ${rssStart.toFixed(0)} MB, at the end (after gc) ${rssMb().toFixed(0)} MB`,
  );
} finally {
  stopFloor();
  await server.close();
}
const load1 = os.loadavg();
console.log(
  `load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}; ` +
    `${os.cpus().length} CPUs, ${MB} MB random file, median of ${RUNS}; ` +
    `TRIAD_RAW_CACHE_BYTES=${process.env.TRIAD_RAW_CACHE_BYTES ?? '(default, 1g)'}`,
);
console.log(
  '\n| VCS | native cat (s) | native cat into a pipe (s) | floor: node:http download (s) | first raw download (s) | raw download (s) | ratio | ratio to the piped cat | server / pooled reader CPU per download (ms) | tree p50/max idle (ms) | tree p50/max during download (ms) | RSS before / peak / after (MB) |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) {
  console.log(
    `| ${r.kind} | ${r.native.toFixed(2)} | ${r.piped.toFixed(2)} | ${r.floor.toFixed(2)} | ${r.first.toFixed(2)} | ${r.triad.toFixed(2)} | ${(r.triad / r.native).toFixed(2)} | ${(r.triad / r.piped).toFixed(2)} | ${r.cpu.toFixed(0)} / ${r.readerCpu.toFixed(0)} | ` +
      `${pct(r.treeIdle, 50).toFixed(1)} / ${Math.max(...r.treeIdle).toFixed(1)} | ` +
      `${pct(r.treeBusy, 50).toFixed(1)} / ${Math.max(...r.treeBusy).toFixed(1)} (n=${r.treeBusy.length}) | ` +
      `${r.rss.map((x) => x.toFixed(0)).join(' / ')} |`,
  );
}
