import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { freePort } from '../../src/db/database.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { Client, freshDatabase, uniq } from '../helpers/server.ts';
import { hostedDir, newRepo } from '../helpers/factories.ts';
import { ok, tempDir, vcsEnv, writeFile } from '../helpers/vcs.ts';
import { WorkingCopy } from '../helpers/clients.ts';
import { filesUnder, killProcessesWithEnv, noFilesUnder, waitNoProcesses } from '../helpers/transport.ts';
import { sleep, waitFor } from '../helpers/wait.ts';
import pg from 'pg';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const CLI = path.join(ROOT, 'src/cli.ts');
const PIPELINE = 'steps:\n  - name: t\n    image: alpine\n    commands: [echo hi]\n';

/**
 * `triad serve` as a child process, killed with SIGKILL in the middle of pushes and started
 * again on the same database and data directory.
 */
let server: ChildProcess | undefined;
let output = '';
let url: string;
let env: NodeJS.ProcessEnv;
let dbUrl: string;
let dataDir: string;
let admin: Client;
let org: string;
let spool: string;

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'DATABASE_URL' || k === 'NODE_OPTIONS' || k === 'PORT' || k.startsWith('TRIAD_')) continue;
    e[k] = v;
  }
  return { ...e, ...extra };
}

async function start(): Promise<void> {
  output = '';
  const child = spawn(NODE, [CLI, 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  server = child;
  await waitFor(
    'the server to be ready',
    async () => {
      if (child.exitCode !== null) throw new Error(`server exited:\n${output}`);
      const r = await fetch(`${url}/readyz`).catch(() => undefined);
      return r?.status === 200 ? true : undefined;
    },
    60_000,
  );
}

async function killServer(): Promise<void> {
  const child = server!;
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await gone;
  server = undefined;
}

beforeAll(async () => {
  dbUrl = await freshDatabase();
  dataDir = await tempDir('triad-crash-');
  spool = await tempDir('triad-crash-spool-');
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  env = childEnv({
    DATABASE_URL: dbUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    TRIAD_BASE_URL: url,
    TRIAD_DATA_DIR: dataDir,
    TRIAD_ADMIN_TOKEN: 'crash-admin',
    TRIAD_EMBEDDED_AGENT: 'off',
    LOG_LEVEL: 'warn',
    TRIAD_TRANSPORT_SPOOL_DIR: spool,
  });
  await start();
  admin = new Client(url, 'crash-admin');
  org = uniq('crash');
  expect((await admin.post('/api/v1/orgs', { name: org })).status).toBe(201);
}, 90_000);

afterAll(async () => {
  if (server !== undefined) await killServer();
  await killProcessesWithEnv(`SCRIPT_NAME=/${org}/`);
  await fs.rm(dataDir, { recursive: true, force: true });
  await fs.rm(spool, { recursive: true, force: true });
});

async function repoOf(kind: VcsKind) {
  const repo = await newRepo(admin, org, { vcs: kind });
  return { ...repo, dir: hostedDir(dataDir, repo) };
}

/** A push's ref and new head, a status's context and commit. */
const refAndCommit = (p: any): [string, string] =>
  p.status === undefined ? [p.ref, p.after] : [p.status.context, p.status.commit];

async function events(repoId: number): Promise<{ event_type: string; payload: any }[]> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    const r = await c.query('select event_type, payload from outbox_events where repo_id = $1 order by id', [
      repoId,
    ]);
    return r.rows;
  } finally {
    await c.end();
  }
}

/**
 * Starts a push with the stock client, waits until `ready()` says the repository on disk has it
 * (a hook holds the backend there), then kills the server with SIGKILL and the client after it.
 */
async function pushAndKillServer(w: WorkingCopy, ready: () => Promise<boolean>): Promise<void> {
  const [cmd, args] = w.pushCommand();
  const client = spawn(cmd, args, { cwd: w.dir, env: vcsEnv, stdio: 'ignore', detached: true });
  const clientGone = new Promise((resolve) => client.once('exit', resolve));
  await waitFor('the push to reach the repository', async () => ((await ready()) ? true : undefined));
  await killServer();
  try {
    process.kill(-client.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
  await clientGone;
}

async function exists(p: string): Promise<boolean> {
  return fs
    .access(p)
    .then(() => true)
    .catch(() => false);
}

describe('a server killed with SIGKILL during a push', () => {
  test('when a git push has written its refs, then after a restart the push has its event and pipeline, and the next push continues from it', async () => {
    const repo = await repoOf('git');
    const w = await WorkingCopy.clone('git', repo.clone, 'crash-admin');
    await w.commit('.pipeline.yml', PIPELINE, 'with ci');
    const head = await w.head();
    const flag = path.join(await tempDir(), 'refs-written');
    await writeFile(repo.dir, 'hooks/post-receive', `#!/bin/sh\ntouch ${flag}\nsleep 60\n`);
    await fs.chmod(path.join(repo.dir, 'hooks/post-receive'), 0o755);

    await pushAndKillServer(w, () => exists(flag));
    expect((await ok('git', ['rev-parse', 'main'], repo.dir)).trim()).toBe(head);
    expect(await events(repo.id)).toEqual([]);
    // the backend and its hook did not outlive the server
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);

    await fs.rm(path.join(repo.dir, 'hooks/post-receive'));
    await start();
    const recorded = await events(repo.id);
    // the push, and its pipeline's commit status (`triad/pipeline`, pending)
    expect(recorded.map((e) => [e.event_type, ...refAndCommit(e.payload)])).toEqual([
      ['push', 'main', head],
      ['status', 'triad/pipeline', head],
    ]);
    expect(recorded[0]!.payload.commits.map((c: { id: string }) => c.id)).toEqual([head]);
    const p = await admin.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ commit_node: head, branch: 'main', event: 'push' });

    await w.commit('next.txt', 'next\n', 'next');
    expect((await w.push()).code).toBe(0);
    const after = (await events(repo.id)).filter((e) => e.event_type === 'push');
    expect(after).toHaveLength(2);
    expect(after[1]!.payload).toMatchObject({ before: head, total_commits: 1 });
    // the killed process's spool directory (its spooled push body) is gone, the new one is empty
    // once the push's clean-up ran (the server removes its workspace after sending the answer)
    const dirs = await fs.readdir(spool);
    expect(dirs).toHaveLength(1);
    expect(await noFilesUnder(path.join(spool, dirs[0]!))).toEqual([]);
  }, 120_000);

  test('when an hg push has committed its transaction, then after a restart the push has its event and pipeline', async () => {
    const repo = await repoOf('hg');
    const w = await WorkingCopy.clone('hg', repo.clone, 'crash-admin');
    await w.commit('.pipeline.yml', PIPELINE, 'with ci');
    const head = await w.head();
    const flag = path.join(await tempDir(), 'committed');
    await writeFile(repo.dir, '.hg/hgrc', `[hooks]\ntxnclose.wait = touch ${flag} && sleep 60\n`);

    await pushAndKillServer(w, () => exists(flag));
    await fs.rm(path.join(repo.dir, '.hg', 'hgrc'));
    expect((await ok('hg', ['log', '-R', repo.dir, '-r', 'tip', '-T', '{node}'], repo.dir)).trim()).toBe(
      head,
    );
    expect(await events(repo.id)).toEqual([]);
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);

    await start();
    const recorded = await events(repo.id);
    expect(recorded.map((e) => [e.event_type, ...refAndCommit(e.payload)])).toEqual([
      ['push', 'default', head],
      ['status', 'triad/pipeline', head],
    ]);
    const p = await admin.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ commit_node: head, branch: 'default', event: 'push' });
  }, 120_000);

  test('when an hg push is killed inside its transaction, then after a restart nothing changed, nothing is recorded, and the next push works', async () => {
    const repo = await repoOf('hg');
    const w = await WorkingCopy.clone('hg', repo.clone, 'crash-admin');
    await w.commit('a.txt', 'a\n', 'never landed');
    const flag = path.join(await tempDir(), 'in-transaction');
    await writeFile(repo.dir, '.hg/hgrc', `[hooks]\npretxnchangegroup.wait = touch ${flag} && sleep 60\n`);

    await pushAndKillServer(w, () => exists(flag));
    await fs.rm(path.join(repo.dir, '.hg', 'hgrc'));
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);
    await start();
    expect(await events(repo.id)).toEqual([]);
    expect(await fs.readdir(path.join(repo.dir, '.hg', 'store'))).not.toContain('journal');
    expect((await ok('hg', ['log', '-R', repo.dir, '-T', '{node}\n'], repo.dir)).trim()).toBe('');

    await w.commit('b.txt', 'b\n', 'landed');
    expect((await w.push()).code).toBe(0);
    const recorded = await events(repo.id);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]!.payload.commits.map((c: { subject: string }) => c.subject)).toEqual([
      'landed',
      'never landed',
    ]);
  }, 120_000);

  test('when a fossil push is killed as soon as its check-in is on disk, then after a restart the check-in is recorded (or absent and unrecorded)', async () => {
    const repo = await repoOf('fossil');
    const file = path.join(dataDir, 'repos', `${repo.id}.fossil`);
    const w = await WorkingCopy.clone('fossil', repo.clone, 'crash-admin');
    await w.commit('.pipeline.yml', PIPELINE, 'with ci');
    const head = await w.head();
    const onDisk = async () =>
      (
        await ok(
          'fossil',
          ['sql', '-R', file, '--readonly', `select count(*) from blob where uuid like '${head}%'`],
          dataDir,
        )
      ).trim() !== '0';
    await pushAndKillServer(w, onDisk);
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);
    await sleep(200);
    const landed = await onDisk();
    await start();
    const recorded = await events(repo.id);
    if (landed) {
      expect(recorded.map((e) => [e.event_type, refAndCommit(e.payload)[0]])).toEqual([
        ['push', 'trunk'],
        ['status', 'triad/pipeline'],
      ]);
      expect(recorded[0]!.payload.after.startsWith(head)).toBe(true);
      const p = await admin.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
      expect(p.body).toMatchObject({ branch: 'trunk', event: 'push' });
    } else {
      expect(recorded).toEqual([]);
    }
  }, 120_000);
});

/** Stops the server with SIGTERM (a clean stop) and waits for it to exit. */
async function stopServer(): Promise<number | null> {
  const child = server!;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const code = await exited;
  server = undefined;
  return code;
}

describe('leftovers of interrupted pushes and of stopped servers', () => {
  test('when a git push is killed with the server while its pre-receive hook runs, then its quarantine (objects/tmp_objdir-incoming-*) is removed by the next push, which goes through', async () => {
    const repo = await repoOf('git');
    const w = await WorkingCopy.clone('git', repo.clone, 'crash-admin');
    await w.commit('big.bin', 2 * 1024 * 1024, 'never accepted');
    const flag = path.join(await tempDir(), 'in-hook');
    await writeFile(repo.dir, 'hooks/pre-receive', `#!/bin/sh\ntouch ${flag}\nsleep 60\n`);
    await fs.chmod(path.join(repo.dir, 'hooks/pre-receive'), 0o755);
    const quarantines = async () =>
      (await fs.readdir(path.join(repo.dir, 'objects'))).filter((n) => n.includes('incoming-'));

    await pushAndKillServer(w, () => exists(flag));
    expect(await waitNoProcesses(`SCRIPT_NAME=/${org}/`)).toEqual([]);
    await fs.rm(path.join(repo.dir, 'hooks/pre-receive'));
    // the received objects stayed in git's quarantine, unaccepted
    const left = await quarantines();
    expect(left).toEqual([expect.stringMatching(/^tmp_objdir-incoming-/)]);
    expect((await filesUnder(path.join(repo.dir, 'objects', left[0]!))).length).toBeGreaterThan(0);

    await start();
    await w.commit('next.txt', 'next\n', 'next');
    expect((await w.push()).code).toBe(0);
    expect(await quarantines()).toEqual([]);
    const recorded = await events(repo.id);
    expect(recorded.map((e) => e.payload.commits.map((c: { subject: string }) => c.subject))).toEqual([
      ['next', 'never accepted'],
    ]);
  }, 120_000);

  test('when the server stops cleanly (SIGTERM), then its spool directory is gone; when one is killed, the next start removes its directory before any transfer', async () => {
    const repo = await repoOf('fossil');
    // a clone and a push leave the process's spool directory with its CGI scripts
    const w = await WorkingCopy.clone('fossil', repo.clone, 'crash-admin');
    await w.commit('a.txt', 'a\n', 'a');
    expect((await w.push()).code).toBe(0);
    const own = await fs.readdir(spool);
    expect(own).toHaveLength(1);
    expect((await filesUnder(path.join(spool, own[0]!))).length).toBeGreaterThan(0);

    expect(await stopServer()).toBe(0);
    expect(await fs.readdir(spool)).toEqual([]);

    await start();
    const made = await fs.readdir(spool);
    expect(made).toHaveLength(1);
    await killServer();
    expect(await fs.readdir(spool)).toEqual(made);
    await start();
    // no transfer yet: the killed process's directory went at the start, a new one is there
    const now = await fs.readdir(spool);
    expect(now).toHaveLength(1);
    expect(now).not.toEqual(made);
  }, 120_000);
});
