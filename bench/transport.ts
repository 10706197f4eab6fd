/**
 * Push and clone through Triad next to the VCS's own server: the whole generated history pushed
 * into an empty repository, a clone of it, then a push of five more small commits, for Git
 * (`git http-backend` as a CGI program under a bare `node:http` server), Mercurial (`hg serve`)
 * and Fossil (`fossil server`; the pushed repository is the generated one given the target's
 * project code, see `benchFossil`). The repositories are the ones bench/contents.ts generates
 * (bench/repos.ts, kept between runs). Triad runs as `node src/cli.ts serve`, a process of its own.
 *
 *   npm run bench:transport [-- --commits 10000] [--kinds hg,git,fossil]
 *
 * Triad runs with the settings in the environment: `TRIAD_HG_STREAM_CLONES=allow npm run
 * bench:transport -- --kinds hg` compares Mercurial clones that both get a changegroup.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { treeCpuMs } from './lib/cpu.ts';
import { apiCaller, startServerProcess } from './lib/server.ts';
import { runCgi } from '../src/vcs/process/cgi.ts';
import { ENV, generateRepos } from './repos.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    kinds: { type: 'string', default: 'hg,git,fossil' },
  },
});
const COMMITS = Number(values.commits);
const KINDS = new Set(values.kinds.split(','));
const WORK = path.join(import.meta.dirname, '.work', 'contents', String(COMMITS));
const run = async (cmd: string, args: string[], cwd: string): Promise<string> =>
  (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 512 * 1024 * 1024 })).stdout;
const HG = '/usr/bin/hg';
const FOSSIL = 'fossil';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Wall-clock seconds of a step, and the CPU seconds this process's tree used meanwhile. */
type Timing = { s: number; cpu: number };
async function timed(fn: () => Promise<unknown>): Promise<Timing> {
  const c = await treeCpuMs();
  const t = performance.now();
  await fn();
  const s = (performance.now() - t) / 1000;
  return { s, cpu: ((await treeCpuMs()) - c) / 1000 };
}

async function until(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(url).then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

const repos = await generateRepos(WORK, COMMITS);
const server = await startServerProcess('transport');
// The rest runs at top level: a run that fails still sends the server its SIGTERM (its graceful
// shutdown stops its PostgreSQL; the temporary directory is left).
process.once('exit', () => {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM');
});
const { url: triadBase, token, dir: tmp } = server;
const call = apiCaller(triadBase, token);
const api = (p: string, body: unknown) => call('POST', p, body);
await api('/api/v1/orgs', { name: 'bench' });
const triadUrl = (name: string) => `${triadBase.replace('://', `://x:${token}@`)}/bench/${name}`;

const children: ChildProcess[] = [];

// Git's own server: git http-backend, one CGI process per request, under a bare node:http server.
const gitRoot = path.join(tmp, 'git-native');
await fs.mkdir(gitRoot);
await run('git', ['init', '-q', '--bare', '-b', 'main', 'target.git'], gitRoot);
const gitServer = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  void (async () => {
    const body = path.join(tmp, `body-${Math.random()}`);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    await fs.writeFile(body, Buffer.concat(chunks));
    const size = (await fs.stat(body)).size;
    await runCgi({
      command: 'git',
      args: ['http-backend'],
      env: {
        GIT_PROJECT_ROOT: gitRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'http.receivepack',
        GIT_CONFIG_VALUE_0: 'true',
      },
      req,
      res,
      pathInfo: url.pathname,
      scriptName: '',
      queryString: url.search.slice(1),
      input: { file: body, size },
      tmpDir: tmp,
      signal: new AbortController().signal,
    });
    res.end();
    await fs.rm(body, { force: true });
  })();
});
const gitPort = await freePort();
await new Promise<void>((r) => gitServer.listen(gitPort, '127.0.0.1', r));

// Mercurial's own server.
const hgTarget = path.join(tmp, 'hg-native');
await run(HG, ['init', hgTarget], tmp);
const hgPort = await freePort();
children.push(
  spawn(
    HG,
    [
      'serve',
      '-R',
      hgTarget,
      '-p',
      String(hgPort),
      '-a',
      '127.0.0.1',
      '--config',
      'web.push_ssl=false',
      '--config',
      'web.allow-push=*',
    ],
    { env: ENV, stdio: 'ignore' },
  ),
);
await until(`http://127.0.0.1:${hgPort}/?cmd=capabilities`);

type Row = { kind: string; step: string; triad: Timing; native: Timing };
const rows: Row[] = [];
const record = (r: Row) => {
  rows.push(r);
  console.log(
    `${r.kind}: ${r.step}: Triad ${r.triad.s.toFixed(2)} s (CPU ${r.triad.cpu.toFixed(2)} s), native ${r.native.s.toFixed(2)} s (CPU ${r.native.cpu.toFixed(2)} s)`,
  );
};

/**
 * Fossil: a push needs a source repository with the target's project code. The generated history
 * is copied and given the project code of the empty Triad repository (read from a clone of it);
 * Fossil's own server serves a new repository given the same code.
 */
async function benchFossil(): Promise<void> {
  const dir = path.join(tmp, 'fossil');
  await fs.mkdir(dir);
  await api('/api/v1/orgs/bench/repos', { name: 'fossil-push', vcs: 'fossil' });
  const triad = `${triadBase}/bench/fossil-push`;
  const auth = ['-B', `x:${token}`];
  await run(FOSSIL, ['clone', ...auth, triad, 'empty.fossil'], dir);
  const code = (
    await run(
      FOSSIL,
      ['sql', '-R', 'empty.fossil', `SELECT value FROM config WHERE name = 'project-code'`],
      dir,
    )
  )
    .trim()
    .replace(/'/g, '');
  const src = path.join(dir, 'src.fossil');
  await fs.copyFile(repos.fossil, src);
  const sameCode = `UPDATE config SET value = '${code}' WHERE name = 'project-code'`;
  await run(FOSSIL, ['sql', '-R', src, sameCode], dir);
  await run(FOSSIL, ['new', 'native.fossil'], dir);
  await run(
    FOSSIL,
    ['sql', '-R', 'native.fossil', `${sameCode}; UPDATE user SET cap = 'giozh' WHERE login = 'nobody'`],
    dir,
  );
  const port = await freePort();
  children.push(
    spawn(FOSSIL, ['server', '--port', String(port), '--localhost', 'native.fossil'], {
      cwd: dir,
      env: ENV,
      stdio: 'ignore',
    }),
  );
  const native = `http://127.0.0.1:${port}/`;
  await until(native);
  const push = (to: string) =>
    run(FOSSIL, ['push', '--once', '-R', src, ...(to === triad ? auth : []), to], dir);
  record({
    kind: 'fossil',
    step: `push of ${COMMITS} commits into an empty repository`,
    triad: await timed(() => push(triad)),
    native: await timed(() => push(native)),
  });
  record({
    kind: 'fossil',
    step: `clone of ${COMMITS} commits`,
    triad: await timed(() => run(FOSSIL, ['clone', ...auth, triad, 'clone-triad.fossil'], dir)),
    native: await timed(() => run(FOSSIL, ['clone', native, 'clone-native.fossil'], dir)),
  });
  const work = path.join(dir, 'work');
  await run(FOSSIL, ['open', '-f', '--workdir', work, src], dir);
  await run(FOSSIL, ['settings', 'autosync', 'off'], work);
  for (let i = 1; i <= 5; i++) {
    await fs.writeFile(path.join(work, `increment-${i}.txt`), `increment ${i}\n`);
    await run(FOSSIL, ['add', `increment-${i}.txt`], work);
    await run(FOSSIL, ['commit', '--no-warnings', '-m', `inc ${i}`], work);
  }
  record({
    kind: 'fossil',
    step: 'push of five small commits',
    triad: await timed(() => push(triad)),
    native: await timed(() => push(native)),
  });
}

/** Five small commits in a working copy. */
async function fiveCommits(kind: 'git' | 'hg', dir: string): Promise<void> {
  for (let i = 1; i <= 5; i++) {
    await fs.writeFile(path.join(dir, `increment-${i}.txt`), `increment ${i}\n`);
    if (kind === 'git') {
      await run('git', ['add', '.'], dir);
      await run('git', ['-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', `inc ${i}`], dir);
    } else {
      await run(HG, ['add', '-q', `increment-${i}.txt`], dir);
      await run(HG, ['commit', '-u', 'b', '-m', `inc ${i}`], dir);
    }
  }
}

for (const kind of ['hg', 'git'] as const) {
  if (!KINDS.has(kind)) continue;
  await api('/api/v1/orgs/bench/repos', { name: `${kind}-push`, vcs: kind });
  const src = path.join(tmp, `${kind}-src`);
  const native = kind === 'git' ? `http://127.0.0.1:${gitPort}/target.git` : `http://127.0.0.1:${hgPort}/`;
  const triad = triadUrl(`${kind}-push`);
  // Both servers answer one request before the timing (Triad's first Mercurial request would
  // otherwise include starting its hgweb worker, while `hg serve` was started and waited for).
  const probe = kind === 'git' ? '/info/refs?service=git-upload-pack' : '?cmd=capabilities';
  for (const url of [`${triadBase}/bench/${kind}-push`, native.replace(/\/$/, '')])
    await fetch(`${url}${probe}`).then((r) => r.arrayBuffer());
  if (kind === 'git') await run('git', ['clone', '-q', repos.git, src], tmp);
  else await run(HG, ['clone', '-q', repos.hg, src], tmp);
  const push = (to: string) =>
    kind === 'git'
      ? run('git', ['push', '-q', to, 'main', '--tags'], src)
      : run(HG, ['push', '-q', to], src).catch((e: { code?: number }) => {
          if (e.code !== 1) throw e; // 1: nothing to push
        });
  const clone = (from: string, dest: string, ...extra: string[]) =>
    kind === 'git'
      ? run('git', ['clone', '-q', '--bare', from, dest], tmp)
      : run(HG, ['clone', '-q', '-U', ...extra, from, dest], tmp);
  record({
    kind,
    step: `push of ${COMMITS} commits into an empty repository`,
    triad: await timed(() => push(triad)),
    native: await timed(() => push(native)),
  });
  record({
    kind,
    step: `clone of ${COMMITS} commits`,
    triad: await timed(() => clone(triad, path.join(tmp, `${kind}-clone-triad`))),
    native: await timed(() => clone(native, path.join(tmp, `${kind}-clone-native`))),
  });
  if (kind === 'hg')
    // A plain `hg clone` streams from Triad (TRIAD_HG_STREAM_CLONES=prefer, its default) and gets
    // a changegroup from `hg serve` (Mercurial's default): the same clone with both streaming.
    record({
      kind,
      step: `clone of ${COMMITS} commits, both streamed (\`hg clone --stream\`)`,
      triad: await timed(() => clone(triad, path.join(tmp, 'hg-stream-triad'), '--stream')),
      native: await timed(() => clone(native, path.join(tmp, 'hg-stream-native'), '--stream')),
    });
  await fiveCommits(kind, src);
  record({
    kind,
    step: 'push of five small commits',
    triad: await timed(() => push(triad)),
    native: await timed(() => push(native)),
  });
}

if (KINDS.has('fossil')) await benchFossil();

console.log(`TRIAD_HG_STREAM_CLONES=${process.env.TRIAD_HG_STREAM_CLONES ?? 'prefer (default)'}`);
console.log(
  `| kind | step | Triad (s) | native (s) | ratio | Triad CPU (s) | native CPU (s) | CPU ratio |\n| ---- | ---- | --: | --: | --: | --: | --: | --: |`,
);
for (const { kind, step, triad: t, native: n } of rows)
  console.log(
    `| ${kind} | ${step} | ${t.s.toFixed(2)} | ${n.s.toFixed(2)} | ${(t.s / n.s).toFixed(2)} | ${t.cpu.toFixed(2)} | ${n.cpu.toFixed(2)} | ${(t.cpu / n.cpu).toFixed(2)} |`,
  );

for (const c of children) c.kill();
gitServer.close();
await server.close();
