import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { freePort } from '../../src/db/database.ts';
import { Client, freshDatabase } from '../helpers/server.ts';
import { ok, withCreds, writeFile } from '../helpers/vcs.ts';
import {
  childEnv,
  CLI,
  exited,
  exitWithin,
  NODE,
  postgresUnder,
  processesNaming,
  Processes,
  stderrMatch,
  stop,
  waitReady,
  type Proc,
} from '../helpers/process.ts';

const procs = new Processes();
afterAll(() => procs.cleanup());

async function setup(extra: Record<string, string> = {}) {
  const dataDir = path.join(await procs.tempDir('triad-life-'), 'data');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { PORT: String(port), TRIAD_DATA_DIR: dataDir, LOG_LEVEL: 'info', ...extra };
  return { dataDir, port, url, env };
}

/**
 * A client that starts a request body and never finishes it (authenticated, so the server reads
 * it). It sends the body once the server answered `100 Continue`: the server has then parsed the
 * head and is serving the request.
 */
async function stuckUpload(port: number, token: string): Promise<net.Socket> {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  sock.on('error', () => undefined);
  let got = '';
  const continued = new Promise<void>((resolve, reject) => {
    sock.on('data', (b: Buffer) => {
      got += b.toString();
      if (got.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) resolve();
      else if (got.length >= 25) reject(new Error(`not 100 Continue: ${got}`));
    });
    sock.once('close', () => reject(new Error(`closed before 100 Continue: ${got}`)));
  });
  sock.write(
    `POST /api/v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n`,
  );
  await continued;
  sock.write('{"name":');
  return sock;
}

function closed(sock: net.Socket): Promise<void> {
  if (sock.destroyed || sock.readyState === 'closed') return Promise.resolve();
  return new Promise((resolve) => sock.once('close', () => resolve()));
}

/** Sends the terminal's Ctrl-C: SIGINT to the whole foreground process group. */
function ctrlC(p: Proc): void {
  process.kill(-p.child.pid!, 'SIGINT');
}

/**
 * A detached `triad serve` (so Ctrl-C can reach its group) whose embedded agent runs pipeline 1 of
 * `life/ci`, a one-step pipeline running `commands`.
 */
async function serveRunningPipeline(
  env: Record<string, string>,
  url: string,
  commands: string[],
): Promise<Proc> {
  const p = procs.serve(env, { detached: true });
  await waitReady(p, url);
  const admin = new Client(url, 'adm-token');
  expect((await admin.post('/api/v1/orgs', { name: 'life' })).status).toBe(201);
  const repo = await admin.post('/api/v1/orgs/life/repos', { name: 'ci', vcs: 'git' });
  expect(repo.status).toBe(201);
  const work = await procs.tempDir('triad-life-work-');
  await ok('git', ['init', '-q', '-b', 'main', work], work);
  const pipeline = { steps: [{ name: 'slow', image: 'alpine', commands }] };
  await writeFile(work, '.pipeline.yml', JSON.stringify(pipeline));
  await ok('git', ['add', '-A'], work);
  await ok('git', ['commit', '-q', '-m', 'ci'], work);
  await ok('git', ['push', '-q', withCreds(repo.body.data.clone_url, 'adm-token'), 'main'], work);
  let status = '';
  for (let i = 0; i < 100 && status !== 'running'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    status = (await admin.get('/api/v1/repos/life/ci/pipelines/1')).body?.status ?? '';
  }
  expect(status).toBe('running');
  // the step's commands run: their first line is in the step's log
  let log = '';
  for (let i = 0; i < 150 && !log.includes('started'); i++) {
    await new Promise((r) => setTimeout(r, 200));
    log = (await admin.get('/api/v1/repos/life/ci/pipelines/1/steps/1/log')).text;
  }
  expect(log).toContain('started');
  return p;
}

describe('stopping triad serve', () => {
  test('when Ctrl-C reaches the process group of an idle server, then it exits 0 at once with "shutdown complete" and no PostgreSQL of its data dir survives', async () => {
    // a shutdown deadline far past this test's time limit: only an exit at once passes
    const { dataDir, url, env } = await setup({ TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '600' });
    const p = procs.serve(env, { detached: true });
    await waitReady(p, url);
    const pg = await postgresUnder(dataDir);
    expect(pg.length).toBeGreaterThan(0);

    ctrlC(p);
    expect(await exited(p.child)).toEqual({ code: 0, signal: null });
    expect(p.output()).toMatch(/"signal":"SIGINT".*shutting down/);
    expect(p.output()).toContain('"msg":"shutdown complete"');
    expect(p.output()).not.toMatch(/"status":5\d\d/);
    expect(await postgresUnder(dataDir)).toEqual([]);
    await expect(fs.stat(path.join(dataDir, 'triad.pid'))).rejects.toThrow(/ENOENT/);
  }, 60_000);

  test('when Ctrl-C reaches `npm start`, then npm too exits 0 after "shutdown complete"', async () => {
    const { dataDir, url, env } = await setup({ TRIAD_EMBEDDED_AGENT: 'off' });
    const p = procs.serve(env, { detached: true, npmStart: true });
    await waitReady(p, url);
    ctrlC(p);
    expect(await exitWithin(p, 15_000)).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('"msg":"shutdown complete"');
    expect(await postgresUnder(dataDir)).toEqual([]);
  }, 60_000);

  test('when a client is stuck in the middle of a request body, then Ctrl-C and SIGTERM still end in "shutdown complete" and exit 0 within TRIAD_SHUTDOWN_TIMEOUT_SECONDS', async () => {
    const timeout = 4;
    const { dataDir, port, url, env } = await setup({
      TRIAD_SHUTDOWN_TIMEOUT_SECONDS: String(timeout),
      TRIAD_ADMIN_TOKEN: 'stuck-upload-token',
    });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const p = procs.serve(env, { detached: true });
      await waitReady(p, url);
      const sock = await stuckUpload(port, 'stuck-upload-token');
      if (signal === 'SIGINT') ctrlC(p);
      else p.child.kill('SIGTERM');
      // The deadline holds: the stuck upload alone would keep the server past this test's limit.
      expect(await exited(p.child)).toEqual({ code: 0, signal: null });
      await closed(sock);
      expect(p.output()).toContain('"msg":"shutdown complete"');
      expect(p.output()).toContain('drain deadline reached');
      expect(await postgresUnder(dataDir)).toEqual([]);
    }
  }, 90_000);

  test('when Ctrl-C arrives while the embedded agent runs a pipeline, then the server still exits 0 with "shutdown complete" within the timeout, and after a restart the pipeline is no longer running', async () => {
    const { dataDir, url, env } = await setup({
      TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '6',
      TRIAD_ADMIN_TOKEN: 'adm-token',
    });
    const p = await serveRunningPipeline(env, url, ['echo started', 'sleep 60']);
    ctrlC(p);
    expect(await exited(p.child)).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('"msg":"shutdown complete"');
    expect(await postgresUnder(dataDir)).toEqual([]);

    const again = procs.serve(env);
    await waitReady(again, url);
    const after = await new Client(url, 'adm-token').get('/api/v1/repos/life/ci/pipelines/1');
    expect(['error', 'cancelled']).toContain(after.body.status);
    expect(await stop(again)).toEqual({ code: 0, signal: null });
  }, 120_000);

  test('when the embedded agent cannot stop its step within the shutdown budget, then the server ends the pipeline as error itself before it exits', async () => {
    // Unsandboxed, a cancelled step gets SIGTERM and SIGKILL 2 s later: a step ignoring SIGTERM
    // outlives the agent's share of a 6 s budget, so the agent cannot report it.
    const { url, env } = await setup({
      TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '6',
      TRIAD_ADMIN_TOKEN: 'adm-token',
      TRIAD_AGENT_LOCAL_UNSANDBOXED: 'true',
    });
    const marker = `60.${randomInt(1000, 9999)}`;
    const p = await serveRunningPipeline(env, url, [`trap '' TERM; echo started; sleep ${marker}`]);
    ctrlC(p);
    expect(await exited(p.child)).toEqual({ code: 0, signal: null });
    expect(p.output()).toContain('the embedded agent did not stop in time');
    expect(p.output()).toContain('"msg":"shutdown complete"');
    // nor does the step outlive the server (its SIGKILL may take a moment to land)
    let left = await processesNaming(marker);
    for (let i = 0; i < 20 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await processesNaming(marker);
    }
    expect(left).toEqual([]);

    // no agent after the restart: nothing but the shutdown itself can have ended the pipeline
    const again = procs.serve({ ...env, TRIAD_EMBEDDED_AGENT: 'off' });
    await waitReady(again, url);
    const after = await new Client(url, 'adm-token').get('/api/v1/repos/life/ci/pipelines/1');
    expect(after.body).toMatchObject({
      status: 'error',
      error_message: 'the server stopped while this pipeline ran',
    });
    expect(await stop(again)).toEqual({ code: 0, signal: null });
  }, 120_000);

  test('when the server is killed with SIGKILL, then its PostgreSQL is left behind, and the next start stops it and comes up', async () => {
    const { dataDir, url, env } = await setup({ TRIAD_EMBEDDED_AGENT: 'off' });
    const first = procs.serve(env);
    await waitReady(first, url);
    const [orphan] = await postgresUnder(dataDir);
    expect(orphan).toBeDefined();
    first.child.kill('SIGKILL');
    expect(await exitWithin(first, 5_000)).toEqual({ code: null, signal: 'SIGKILL' });
    // The crash left the lock file and the cluster running.
    expect(await postgresUnder(dataDir)).toContain(orphan);
    await expect(fs.readFile(path.join(dataDir, 'triad.pid'), 'utf8')).resolves.toContain(
      `"pid":${first.child.pid}`,
    );

    const second = procs.serve(env);
    await waitReady(second, url);
    expect(second.output()).toContain('stopping the PostgreSQL left running by a Triad process that is gone');
    const now = await postgresUnder(dataDir);
    expect(now).not.toContain(orphan);
    expect(now.length).toBeGreaterThan(0);
    expect(await stop(second)).toEqual({ code: 0, signal: null });
    expect(await postgresUnder(dataDir)).toEqual([]);
  }, 60_000);
});

/** A web form posted as a browser on the page's own origin would post it (no redirect followed). */
function webForm(url: string, path: string, fields: Record<string, string>): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams(fields).toString(),
  });
}

describe('first start, a data directory in use, and the CLI next to a running server', () => {
  test('when the first start finds no user, then it prints a one-time admin token; a second server is refused with the owner named; the CLI works against the running server', async () => {
    const { dataDir, url, env } = await setup({ TRIAD_EMBEDDED_AGENT: 'off' });
    const first = procs.serve(env);
    await waitReady(first, url);
    const token = (await stderrMatch(first, /^ {3}(triad_[0-9a-f]{48})$/m))?.[1];
    expect(token).toBeDefined();
    expect(first.output()).toContain(
      '"msg":"first start: created the administrator (its token is shown once)"',
    );
    // Shown once, in the banner: the JSON log (kept by collectors) names the user only.
    const logged = first
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"first start'));
    expect(JSON.parse(logged!)).toMatchObject({ username: 'admin' });
    expect(first.output().split(token!).length - 1).toBe(1);
    const admin = new Client(url, token);
    const me = await admin.get('/api/v1/user');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ username: 'admin', is_admin: true });

    // Beside the token, a one-time link sets the web password (the base URL here is localhost)
    const link = (await stderrMatch(
      first,
      /^ {3}(http:\/\/localhost:\d+\/-\/password\/set\?token=(triad_pw_[0-9a-f]{48}))$/m,
    ))!;
    expect(link[1]).toBe(`http://localhost:${new URL(url).port}/-/password/set?token=${link[2]}`);
    const setPage = await fetch(`${url}/-/password/set?token=${link[2]}`);
    expect(setPage.status).toBe(200);
    expect(await setPage.text()).toContain('Set the password of admin');
    const set = await webForm(url, '/-/password/set', {
      token: link[2]!,
      password: 'first-password',
      password_confirm: 'first-password',
    });
    expect(set.status).toBe(303);
    expect(set.headers.get('set-cookie')).toMatch(
      /^triad_session=[\w-]{43}; Max-Age=2592000; Path=\/; HttpOnly; SameSite=Lax$/,
    );
    // the link works once
    expect((await fetch(`${url}/-/password/set?token=${link[2]}`)).status).toBe(404);
    expect((await webForm(url, '/-/login', { login: 'admin', password: 'first-password' })).status).toBe(303);
    // the access log never keeps the link's secret
    expect(first.output()).not.toContain(`token=${link[2]}"`);

    // A second server on the same data directory: refused, naming the directory and the owner.
    const second = procs.serve({ ...env, PORT: String(await freePort()) });
    expect(await exitWithin(second, 30_000)).toEqual({ code: 1, signal: null });
    expect(second.stderr()).toContain(
      `triad: the data directory ${dataDir} is in use by Triad process ${first.child.pid} (\`triad serve\``,
    );
    expect(second.stderr()).toMatch(/with its PostgreSQL process \d+/);
    expect(second.stderr()).not.toContain('undefined');
    // The refused start left the running server alone.
    expect((await admin.get('/api/v1/user')).status).toBe(200);

    // The CLI uses the running server's PostgreSQL.
    const created = await procs.runCli(
      ['admin', 'user', 'create', '--username', 'carol', '--email', 'carol@example.test', '--access-token'],
      env,
    );
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const carolToken = created.stdout.trim().split('\n')[1]!;
    expect((await new Client(url, carolToken).get('/api/v1/user')).body.data).toMatchObject({
      username: 'carol',
    });
    // a web password from standard input, or a one-time link to set it
    const pw = await procs.runCli(
      ['admin', 'user', 'password', '--username', 'carol'],
      env,
      'carol-password\n',
    );
    expect(pw).toMatchObject({
      code: 0,
      stderr: '',
      stdout: 'password set for carol; its web sessions were ended\n',
    });
    expect((await webForm(url, '/-/login', { login: 'carol', password: 'carol-password' })).status).toBe(303);
    const short = await procs.runCli(['admin', 'user', 'password', '--username', 'carol'], env, 'short\n');
    expect(short.code).toBe(1);
    expect(short.stderr).toBe('triad: password: must be at least 8 characters long\n');
    const viaLink = await procs.runCli(['admin', 'user', 'password', '--username', 'carol', '--link'], env);
    expect(viaLink.code).toBe(0);
    expect(viaLink.stdout).toMatch(
      /^http:\/\/localhost:\d+\/-\/password\/set\?token=triad_pw_[0-9a-f]{48}\n$/,
    );
    const linkPath = new URL(viaLink.stdout.trim()).pathname + new URL(viaLink.stdout.trim()).search;
    expect(await (await fetch(`${url}${linkPath}`)).text()).toContain('Set the password of carol');

    const minted = await procs.runCli(['admin', 'token', 'create', '--username', 'admin'], env);
    expect(minted).toMatchObject({ code: 0, stderr: '' });
    const again = await new Client(url, minted.stdout.trim()).get('/api/v1/user');
    expect(again.body.data).toMatchObject({ username: 'admin' });
    const agent = await procs.runCli(['admin', 'agent', 'create', '--name', 'ci-1'], env);
    expect(agent.code).toBe(0);
    expect(agent.stdout).toMatch(/^created agent ci-1 \(id \d+\)\n\S+\n$/);

    // Later starts print no token.
    expect(await stop(first)).toEqual({ code: 0, signal: null });
    const third = procs.serve(env);
    await waitReady(third, url);
    expect(third.stderr()).not.toContain('first start');
    expect(third.output()).not.toContain('triad_');
    expect(await stop(third)).toEqual({ code: 0, signal: null });

    // With no server running, the CLI starts its own cluster and stops it again.
    const offline = await procs.runCli(['admin', 'token', 'create', '--username', 'carol'], env);
    expect(offline.code).toBe(0);
    expect(await postgresUnder(dataDir)).toEqual([]);
  }, 120_000);

  test('when a CLI command fails, then it prints a real message (the unknown command, the missing or unknown flag), never "undefined"', async () => {
    const { dataDir, env } = await setup({ DATABASE_URL: await freshDatabase() });
    const noUser = await procs.runCli(['admin', 'token', 'create'], env);
    expect(noUser).toMatchObject({ code: 1, stderr: 'triad: admin token create: --username is required\n' });
    const noFlags = await procs.runCli(['admin', 'user', 'create', '--display-name', 'Ada'], env);
    expect(noFlags).toMatchObject({
      code: 1,
      stderr: 'triad: admin user create: --username and --email are required\n',
    });
    const noName = await procs.runCli(['admin', 'agent', 'create'], env);
    expect(noName).toMatchObject({ code: 1, stderr: 'triad: admin agent create: --name is required\n' });
    const badFlag = await procs.runCli(['admin', 'token', 'create', '--user', 'carol'], env);
    expect(badFlag).toMatchObject({ code: 1, stderr: 'triad: admin token create: unknown flag --user\n' });
    for (const args of [['frob'], ['admin', 'user', 'delete']]) {
      const r = await procs.runCli(args, env);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(`^triad: unknown command "${args.join(' ')}"\n\nusage: triad <command>\n`),
      );
    }
    const unknown = await procs.runCli(['admin', 'token', 'create', '--username', 'nobody-here'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^triad: .*user.*\n$/);
    expect(unknown.stderr).not.toContain('undefined');
    // A data directory that cannot be one (a regular file).
    const file = path.join(path.dirname(dataDir), 'a-file');
    await fs.writeFile(file, 'not a directory');
    const broken = await procs.runCli(['migrate'], { ...env, DATABASE_URL: '', TRIAD_DATA_DIR: file });
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/^triad: .*(EEXIST|ENOTDIR|not a directory)/);
    expect(broken.stderr).not.toContain('undefined');
  }, 60_000);
});

describe('the log on a terminal', () => {
  test("when stdout is a terminal, then the log reads as lines of time, level, message and fields, and agents' polls and heartbeats are logged at debug", async () => {
    const { url, env } = await setup({ DATABASE_URL: await freshDatabase(), LOG_LEVEL: 'debug' });
    const agent = await procs.runCli(['admin', 'agent', 'create', '--name', 'tty-agent'], env);
    const agentToken = agent.stdout.trim().split('\n')[1]!;
    // `script` runs the server on a pseudo-terminal, as a person starting it in a shell does.
    const child = spawn('script', ['-qfec', `${NODE} ${CLI} serve`, '/dev/null'], {
      env: childEnv({ ...env, TRIAD_EMBEDDED_AGENT: 'off' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    procs.children.add(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const p: Proc = { child, output: () => out, stderr: () => out };
    await waitReady(p, url);
    const headers = { authorization: `Bearer ${agentToken}`, 'x-svc-agent-instance': 'tty-1' };
    expect((await fetch(`${url}/api/v1/ci/poll`, { method: 'POST', headers })).status).toBe(204);
    const beat = await fetch(`${url}/api/v1/ci/heartbeat`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ running: [] }),
    });
    expect(beat.status).toBe(200);
    expect((await fetch(`${url}/api/v1/ci/poll`, { method: 'POST' })).status).toBe(401);
    const lines = () => out.replace(new RegExp(`${String.fromCharCode(27)}\\[\\d+m`, 'g'), '').split(/\r?\n/);
    const request = (path: string, status: number) =>
      lines().find(
        (l) => l.includes(' request ') && l.includes(`url=${path}`) && l.includes(`status=${status}`),
      );
    const started = Date.now();
    while (request('/api/v1/ci/poll', 401) === undefined && Date.now() - started < 10_000)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lines()).toContainEqual(
      expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}Triad listening on http:\/\/\S+ url=/),
    );
    expect(lines().filter((l) => l.startsWith('{'))).toEqual([]);
    expect(request('/api/v1/ci/poll', 204)).toMatch(/^\S+ DEBUG request /);
    expect(request('/api/v1/ci/heartbeat', 200)).toMatch(/^\S+ DEBUG request /);
    expect(request('/api/v1/ci/poll', 401)).toMatch(/^\S+ INFO {2}request /);
    child.kill('SIGTERM'); // script passes it on (or hangs up the terminal): the server stops
    await exited(child);
    const gone = Date.now();
    while ((await fetch(`${url}/healthz`).catch(() => undefined)) !== undefined && Date.now() - gone < 20_000)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await fetch(`${url}/healthz`).catch(() => 'stopped')).toBe('stopped');
  }, 60_000);
});
