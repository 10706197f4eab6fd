/**
 * What the benchmarks share: a Triad server on a free loopback port with its own data directory
 * and a known admin token (embedded PostgreSQL, no embedded agent, quiet logs), and a JSON API
 * caller that throws on an error status.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { freePort } from '../../src/db/ports.ts';
import { startServer, type Running } from '../../src/server.ts';
import { repoPath, type VcsKind } from '../../src/vcs/index.ts';
import { FOSSIL } from '../../src/vcs/constants.ts';

export type BenchServer = {
  running: Running;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The admin's token (`TRIAD_ADMIN_TOKEN`). */
  token: string;
  /** A temporary directory of the benchmark; the server's data is under `data/` unless given. */
  dir: string;
  /** Stops the server and removes `dir`. */
  close: () => Promise<void>;
};

/** Starts a server for benchmark `name`; `env` adds or overrides settings. */
export async function startBenchServer(
  name: string,
  env: Record<string, string> = {},
  token = 'bench-admin-token',
): Promise<BenchServer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `triad-bench-${name}-`));
  const running = await startServer(
    loadConfig({
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: path.join(dir, 'data'),
      TRIAD_ADMIN_TOKEN: token,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'warn',
      TRIAD_LOG_REQUESTS: 'false',
      ...env,
    }),
  );
  return {
    running,
    url: running.url,
    token,
    dir,
    close: async () => {
      await running.close();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export type ServerProcess = {
  /** `triad serve` (embedded PostgreSQL in its data directory unless `DATABASE_URL` is set). */
  child: ChildProcess;
  url: string;
  token: string;
  dir: string;
  dataDir: string;
  /** Where the server keeps repository `id` of kind `vcs`. */
  storePath: (id: number, vcs: VcsKind) => string;
  /** Stops the server (SIGTERM, its graceful shutdown) and removes `dir`. */
  close: () => Promise<void>;
};

/**
 * Starts `node src/cli.ts serve` as a process of its own, the way it is deployed (its own heap,
 * event loop and garbage collector, apart from the benchmark's clients), on a free loopback port
 * with a temporary data directory and the admin token; resolves once it is ready. `nodeArgs` go
 * before the script (e.g. `--cpu-prof`); `env` adds or overrides settings.
 */
export async function startServerProcess(
  name: string,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
  token = 'bench-admin-token',
): Promise<ServerProcess> {
  const root = path.join(import.meta.dirname, '..', '..');
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `triad-bench-${name}-`));
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, 'src/cli.ts', 'serve'], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: dataDir,
      TRIAD_ADMIN_TOKEN: token,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'warn',
      TRIAD_LOG_REQUESTS: 'false',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const close = async () => {
    if (!gone()) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      // its graceful shutdown, or SIGKILL after 30 s
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitReady(url, gone);
    // the one that answered is this process (the port was free, but another may have taken it)
    if (gone()) throw new Error(`triad serve exited (${child.exitCode ?? child.signalCode})`);
  } catch (e) {
    await close();
    throw e;
  }
  const repoDir = env.TRIAD_REPO_DIR ?? process.env.TRIAD_REPO_DIR ?? path.join(dataDir, 'repos');
  return { child, url, token, dir, dataDir, storePath: (id, vcs) => repoPath(repoDir, id, vcs), close };
}

export type ApiCall = (
  method: string,
  p: string,
  body?: unknown,
  auth?: string | null,
) => Promise<Record<string, any>>;

/**
 * A JSON API caller on `base` with `token` (`auth` per call overrides it; `null` sends none).
 * Throws on a status of 400 or more; a 204 answers `{}`.
 */
export function apiCaller(base: string, token: string): ApiCall {
  return async (method, p, body, auth) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const bearer = auth === undefined ? token : auth;
    if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
    const r = await fetch(`${base}${p}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 400) throw new Error(`${method} ${p}: ${r.status} ${text}`);
    return text === '' ? {} : (JSON.parse(text) as Record<string, any>);
  };
}

/**
 * Waits until a server started as a process of its own answers `/readyz` at `base` (about a
 * minute at most); `exited` tells that the process is gone (no point waiting).
 */
export async function waitReady(base: string, exited: () => boolean = () => false): Promise<void> {
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return;
    if (i > 600 || exited()) throw new Error('server did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Registers a generated repository (`from`) as `org/name`: created through the API, then its
 * storage replaced by a copy of `from`; a Fossil one gets what Triad's repository creation sets up
 * for the clone transport (its reader and writer users, `remote_user_ok`). Answers its id.
 */
export async function registerGenerated(
  server: ServerProcess,
  api: ApiCall,
  org: string,
  name: string,
  vcs: VcsKind,
  from: string,
): Promise<number> {
  const created = await api('POST', `/api/v1/orgs/${org}/repos`, { name, vcs });
  const id = created.data.id as number;
  const store = server.storePath(id, vcs);
  await fs.rm(store, { recursive: true, force: true });
  await fs.cp(from, store, { recursive: true });
  if (vcs === 'fossil') {
    await promisify(execFile)('fossil', [
      'sql',
      '-R',
      store,
      `REPLACE INTO config(name, value, mtime) VALUES ('remote_user_ok', '1', now()); ` +
        `INSERT INTO user(login, pw, cap, info) VALUES ('${FOSSIL.reader}', 'x', 'goz', ''), ('${FOSSIL.writer}', 'x', 'giozh', '')`,
    ]);
  }
  return id;
}
