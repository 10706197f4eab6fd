import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { expect } from '@jest/globals';
import { freePort } from '../../src/db/database.ts';
import { CURRENT_SCOPES } from '../../src/domain/access.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { Client, uniq, type TestUser } from './server.ts';
import { ok, tempDir, withCreds, writeFile } from './vcs.ts';
import { childEnv, CLI, NODE, ROOT } from './process.ts';

/** `triad serve` (or another command) as its own process, with output captured. */
export type Proc = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

export function cli(args: string[], env: Record<string, string>): Proc {
  const child = spawn(NODE, [CLI, ...args], {
    cwd: ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** A real server process on a free port, ready to answer. */
export type Served = Proc & { url: string; port: number; admin: Client };

export async function serve(env: Record<string, string>, adminToken: string, port?: number): Promise<Served> {
  port ??= await freePort();
  const p = cli(['serve'], {
    PORT: String(port),
    HOST: '127.0.0.1',
    TRIAD_ADMIN_TOKEN: adminToken,
    LOG_LEVEL: 'info',
    TRIAD_LOG_REQUESTS: 'false',
    // a connection a client opened without sending a request keeps the drain waiting until this
    TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '5',
    ...env,
  });
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) {
      throw new Error(`server exited before ready:\n${p.output()}`);
    }
    // listening, and past its start (signal handlers installed)
    const r = await fetch(`${url}/readyz`).catch(() => undefined);
    if (r?.status === 200 && p.output().includes('Triad listening on')) break;
    if (Date.now() - started > 60_000) throw new Error(`server not ready:\n${p.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  return { ...p, url, port, admin: new Client(url, adminToken) };
}

export const randomToken = (prefix: string) => `${prefix}${randomBytes(16).toString('hex')}`;

/** A user with a token carrying every scope, created through the admin API. */
export async function userOn(s: Served): Promise<TestUser> {
  const username = uniq('user');
  const u = await s.admin.post('/api/v1/admin/users', { username, email: `${username}@example.test` });
  expect(u.status).toBe(201);
  const t = await s.admin.post(`/api/v1/admin/users/${username}/tokens`, {
    name: 'test',
    scopes: [...CURRENT_SCOPES],
  });
  expect(t.status).toBe(201);
  return { id: u.body.data.id, username, token: t.body.data.token, client: s.admin.as(t.body.data.token) };
}

/** An org of `owner` with a git repository holding `files` on main, pushed. */
export async function pushRepo(
  owner: TestUser,
  files: Record<string, string>,
): Promise<{ org: string; name: string; id: number }> {
  const org = uniq('org');
  expect((await owner.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
  const name = uniq('repo');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'git' });
  expect(r.status).toBe(201);
  const work = await tempDir();
  try {
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    for (const [f, c] of Object.entries(files)) await writeFile(work, f, c);
    await ok('git', ['add', '-A'], work);
    await ok('git', ['commit', '-q', '-m', 'files'], work);
    await ok('git', ['push', '-q', withCreds(r.body.data.clone_url, owner.token), 'main'], work);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
  return { org, name, id: r.body.data.id };
}

export type Pushed = { org: string; name: string; id: number; cloneUrl: string; head: string };

/**
 * A repository of kind `vcs` in `org` (a new org of `owner` when absent), with one commit made by
 * the stock client from what `build` writes into the working copy, pushed by `owner`.
 * `hgPushConfig` is passed to `hg push` (e.g. an extension).
 */
export async function pushWith(
  owner: TestUser,
  opts: { vcs: VcsKind; private?: boolean; org?: string; hgPushConfig?: string[] },
  build: (work: string) => Promise<void>,
): Promise<Pushed> {
  const org = opts.org ?? uniq('org');
  if (opts.org === undefined)
    expect((await owner.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
  const name = uniq('repo');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, {
    name,
    vcs: opts.vcs,
    private: opts.private ?? false,
  });
  expect(r.status).toBe(201);
  const url: string = r.body.data.clone_url;
  const parent = await tempDir();
  const work = path.join(parent, 'w');
  let head = '';
  switch (opts.vcs) {
    case 'git':
      await ok('git', ['init', '-q', '-b', 'main', work], parent);
      await build(work);
      await ok('git', ['add', '-A'], work);
      await ok('git', ['commit', '-q', '-m', 'files'], work);
      await ok('git', ['push', '-q', withCreds(url, owner.token), 'main'], work);
      head = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
      break;
    case 'hg':
      await ok('hg', ['init', work], parent);
      await build(work);
      await ok('hg', ['commit', '-q', '-A', '-m', 'files'], work);
      await ok('hg', [...(opts.hgPushConfig ?? []), 'push', '-q', withCreds(url, owner.token)], work);
      head = (await ok('hg', ['log', '-r', '.', '-T', '{node}'], work)).trim();
      break;
    case 'fossil': {
      const file = path.join(parent, 'repo.fossil');
      await ok('fossil', ['clone', '-B', `x:${owner.token}`, url, file], parent);
      await ok('fossil', ['open', '-f', '--workdir', work, file], parent);
      await ok('fossil', ['settings', 'autosync', 'off'], work);
      await build(work);
      await ok('fossil', ['addremove', '--dotfiles'], work);
      await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', 'files'], work);
      await ok('fossil', ['push', '-B', `x:${owner.token}`, url], work);
      head = /^checkout:\s+([0-9a-f]+)/m.exec(await ok('fossil', ['info'], work))?.[1] ?? '';
      break;
    }
  }
  return { org, name, id: r.body.data.id, cloneUrl: url, head };
}

/** A pipeline file whose steps run `commands` (each written as a YAML double-quoted string). */
export function pipelineYaml(steps: { name: string; commands: string[]; extra?: string }[]): string {
  return `steps:\n${steps
    .map(
      (s) =>
        `  - name: ${s.name}\n    image: alpine\n${s.extra ?? ''}    commands:\n${s.commands
          .map((c) => `      - ${JSON.stringify(c)}\n`)
          .join('')}`,
    )
    .join('')}`;
}

/** Polls a pipeline until `pred` holds (or the time is up) and answers its last state. */
export async function waitPipeline(
  client: Client,
  at: string,
  pred: (p: any) => boolean,
  ms = 60_000,
): Promise<any> {
  const until = Date.now() + ms;
  for (;;) {
    const r = await client.get(at);
    if ((r.status === 200 && pred(r.body)) || Date.now() > until) return r.body;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export const isFinished = (p: any) => ['success', 'failure', 'cancelled', 'error'].includes(p?.status);

/** Pipeline 1 of a repository once finished, with the log of each of its steps. */
export async function finishedPipeline(
  client: Client,
  repo: { org: string; name: string },
): Promise<{ p: any; logs: string[] }> {
  const at = `/api/v1/repos/${repo.org}/${repo.name}/pipelines/1`;
  const p = await waitPipeline(client, at, isFinished, 90_000);
  const logs: string[] = [];
  for (const st of p.steps ?? []) logs.push((await client.get(`${at}/steps/${st.number}/log`)).text);
  return { p, logs };
}

/**
 * The zero-configuration server as `npm start` runs it as root: only a data directory (embedded
 * PostgreSQL, embedded agent with the real sandbox).
 */
export async function zeroConfigAsRoot(prefix: string): Promise<{ s: Served; data: string }> {
  if (process.getuid?.() !== 0) throw new Error('this test runs the server as root, as `npm start` does');
  const data = await tempDir(prefix);
  return { s: await serve({ TRIAD_DATA_DIR: data }, randomToken('adm_')), data };
}

/** Processes whose command line contains `marker`. */
export async function processesWith(marker: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes(marker)) found.push(`${pid}: ${cmd.replace(/\0/g, ' ')}`);
  }
  return found;
}

export { tempDir };
