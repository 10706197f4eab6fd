/**
 * Release asset throughput and server memory. Starts MinIO on loopback (test/helpers/minio.ts)
 * and a Triad server as a child process (embedded PostgreSQL, `TRIAD_S3_*` pointing at MinIO),
 * then measures, for an asset of `--size` MiB:
 *   - upload and download through Triad (multipart POST streamed from a generator; GET drained),
 *   - the same bytes with the npm `minio` client straight to MinIO (putObject of a stream of
 *     known size, getObject drained),
 * and the server's RSS (VmRSS of its process, sampled every 50 ms) during one `--rss-size` MiB
 * upload, as growth over the RSS before it (after one 32 MiB warm-up upload), and the server's CPU
 * time per MiB moved (from /proc, independent of how loaded the machine is). Results are printed; bench/README.md records them.
 *
 *   npm run bench:releases [-- --size 256 --rss-size 1024 --runs 2]
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pattern } from '../test/helpers/bytes.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { postMultipart } from '../test/helpers/multipart.ts';
import { ok, withCreds } from '../test/helpers/vcs.ts';
import { waitReady } from './lib/server.ts';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '256' },
    'rss-size': { type: 'string', default: '1024' },
    runs: { type: 'string', default: '2' },
  },
});
const MiB = 1024 * 1024;
const SIZE = Number(values.size) * MiB;
const RSS_SIZE = Number(values['rss-size']) * MiB;
const RUNS = Number(values.runs);

const minio = await startMinio();
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-releases-'));
const token = 'bench-admin-token';
const port = 20000 + Math.floor(Math.random() * 20000);
const server = spawn(process.execPath, ['src/cli.ts', 'serve'], {
  env: {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    TRIAD_DATA_DIR: dir,
    TRIAD_ADMIN_TOKEN: token,
    TRIAD_EMBEDDED_AGENT: 'off',
    LOG_LEVEL: 'warn',
    TRIAD_LOG_REQUESTS: 'false',
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: 'bench',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
const done = async () => {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  await minio.stop();
  await fs.rm(dir, { recursive: true, force: true });
};
try {
  await waitReady(base, () => server.exitCode !== null);
  const call = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 400) throw new Error(`${method} ${p}: ${r.status} ${text}`);
    return JSON.parse(text) as Record<string, any>;
  };
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const repo = await call('POST', '/api/v1/orgs/bench/repos', { name: 'assets', vcs: 'git' });
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-work-'));
  await ok('git', ['init', '-q', '-b', 'main', work], work);
  await fs.writeFile(path.join(work, 'README'), 'bench\n');
  await ok('git', ['add', '.'], work);
  await ok('git', ['commit', '-q', '-m', 'bench'], work);
  await ok('git', ['push', '-q', withCreds(repo.data.clone_url, token), 'main'], work);
  const rel = await call('POST', '/api/v1/repos/bench/assets/releases', {
    tag_name: 'v1',
    target_commitish: 'main',
  });
  const assetsUrl = `${base}/api/v1/repos/bench/assets/releases/${rel.data.id}/assets`;

  const mbps = (bytes: number, ms: number) => bytes / MiB / (ms / 1000);
  const drain = async (s: AsyncIterable<Uint8Array>) => {
    let n = 0;
    for await (const c of s) n += c.length;
    return n;
  };
  const time = async (fn: () => Promise<unknown>) => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  const rss = async () => {
    const status = await fs.readFile(`/proc/${server.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  };
  /** CPU seconds (user + system) the server process used so far. */
  const cpu = async () => {
    const stat = (await fs.readFile(`/proc/${server.pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
    return (Number(stat[11]) + Number(stat[12])) / 100; // utime, stime in clock ticks (100/s)
  };
  const cpuMs: Record<string, number> = { up: 0, down: 0 };
  const timed = async (which: 'up' | 'down', fn: () => Promise<unknown>) => {
    const c = await cpu();
    const ms = await time(fn);
    cpuMs[which]! += ((await cpu()) - c) * 1000;
    return ms;
  };
  const atStart = await rss();
  // one small upload first, so code loaded and compiled once is not counted as growth
  const warm = await postMultipart(assetsUrl, token, [
    { field: 'attachment', filename: 'warm.bin', data: { size: 32 * MiB, stream: pattern(32 * MiB, 1) } },
  ]);
  if (warm.status !== 201) throw new Error(`warm-up upload: ${warm.status} ${warm.text}`);
  const before = await rss();
  let peak = before;
  const sampler = setInterval(() => {
    rss().then(
      (v) => (peak = Math.max(peak, v)),
      () => undefined,
    );
  }, 50);
  const bigMs = await time(async () => {
    const r = await postMultipart(assetsUrl, token, [
      { field: 'attachment', filename: 'big.bin', data: { size: RSS_SIZE, stream: pattern(RSS_SIZE, 13) } },
    ]);
    if (r.status !== 201) throw new Error(`upload: ${r.status} ${r.text}`);
  });
  clearInterval(sampler);

  const client = minio.client();
  await client.makeBucket('direct', minio.region);
  const results: Record<string, number[]> = { triadUp: [], triadDown: [], directUp: [], directDown: [] };
  for (let run = 0; run < RUNS; run++) {
    let assetUrl = '';
    results.triadUp!.push(
      mbps(
        SIZE,
        await timed('up', async () => {
          const r = await postMultipart(assetsUrl, token, [
            {
              field: 'attachment',
              filename: `a${run}.bin`,
              data: { size: SIZE, stream: pattern(SIZE, run + 3) },
            },
          ]);
          if (r.status !== 201) throw new Error(`upload: ${r.status} ${r.text}`);
          assetUrl = r.body.data.browser_download_url;
        }),
      ),
    );
    results.triadDown!.push(
      mbps(
        SIZE,
        await timed('down', async () => {
          // node:http like the minio client (fetch's web streams would slow the client, not Triad)
          const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
            http.get(assetUrl, resolve).on('error', reject),
          );
          if ((await drain(res)) !== SIZE) throw new Error('short download');
        }),
      ),
    );
    results.directUp!.push(
      mbps(SIZE, await time(() => client.putObject('direct', `d${run}.bin`, pattern(SIZE, run + 3), SIZE))),
    );
    results.directDown!.push(
      mbps(
        SIZE,
        await time(async () => {
          if ((await drain(await client.getObject('direct', `d${run}.bin`))) !== SIZE)
            throw new Error('short');
        }),
      ),
    );
  }

  const best = (xs: number[]) => Math.max(...xs);
  const fmt = (x: number) => `${x.toFixed(0)} MiB/s`;
  const upRatio = best(results.triadUp!) / best(results.directUp!);
  const downRatio = best(results.triadDown!) / best(results.directDown!);
  console.log(`asset ${SIZE / MiB} MiB, best of ${RUNS} runs`);
  console.log(
    `upload:   Triad ${fmt(best(results.triadUp!))}, direct ${fmt(best(results.directUp!))} (${(upRatio * 100).toFixed(0)}%)`,
  );
  console.log(
    `download: Triad ${fmt(best(results.triadDown!))}, direct ${fmt(best(results.directDown!))} (${(downRatio * 100).toFixed(0)}%)`,
  );
  console.log(
    `RSS during a ${RSS_SIZE / MiB} MiB upload (${fmt(mbps(RSS_SIZE, bigMs))}): before ${(before / MiB).toFixed(0)} MiB, ` +
      `peak ${(peak / MiB).toFixed(0)} MiB, growth ${((peak - before) / MiB).toFixed(1)} MiB ` +
      `(${(atStart / MiB).toFixed(0)} MiB right after start, before a 32 MiB warm-up upload)`,
  );
  const perMiB = (ms: number) => `${(ms / ((RUNS * SIZE) / MiB)).toFixed(2)} ms`;
  console.log(
    `server CPU per MiB: upload ${perMiB(cpuMs.up!)}, download ${perMiB(cpuMs.down!)} ` +
      `(1000 ms / that = MiB/s one idle CPU could move)`,
  );
  console.log(JSON.stringify(results));
} finally {
  await done();
}
