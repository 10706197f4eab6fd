/**
 * What bench/storage-nodes.ts starts: an embedded PostgreSQL holding one database per server
 * (the in-process one's and the storage nodes' cluster's), storage nodes as processes of their
 * own (`node src/cli.ts storage`, as deployed), and the SQL that puts a repository's row on a
 * node. Every process is started on loopback and stopped by the caller's `close`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../../src/db/embedded.ts';
import { freePort } from '../../src/db/ports.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { registerGenerated, waitReady, type ApiCall, type ServerProcess } from './server.ts';

const ROOT = path.join(import.meta.dirname, '..', '..');

/** Settings the benchmark's processes must not inherit from the caller's environment. */
const OWN = /^(DATABASE_URL|TRIAD_S3_|TRIAD_STORAGE|TRIAD_REPO_DIR|TRIAD_DATA_DIR|TRIAD_TRANSPORT_SPOOL_DIR)/;

/** `process.env` without the settings this benchmark gives each process itself. */
export function baseEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !OWN.test(k)) out[k] = v;
  return out;
}

export type BenchDatabases = {
  /** URL of database `name` (created by `create`). */
  url: (name: string) => string;
  create: (name: string) => Promise<string>;
  /** Runs one statement on database `name`. */
  sql: (name: string, text: string, values?: unknown[]) => Promise<pg.QueryResult>;
  stop: () => Promise<void>;
};

/** An embedded PostgreSQL cluster in `dir` (a fresh one), on a free loopback port. */
export async function startDatabases(dir: string): Promise<BenchDatabases> {
  const db = await startEmbeddedPostgres(path.join(dir, 'pg'), pino({ level: 'silent' }));
  const url = (name: string) => {
    const u = new URL(db.url);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const clients = new Map<string, pg.Client>();
  const client = async (name: string) => {
    let c = clients.get(name);
    if (c === undefined) {
      c = new pg.Client({ connectionString: url(name) });
      await c.connect();
      clients.set(name, c);
    }
    return c;
  };
  return {
    url,
    create: async (name) => {
      await (await client('postgres')).query(`create database ${name}`);
      return url(name);
    },
    sql: async (name, text, values = []) => (await client(name)).query(text, values),
    stop: async () => {
      for (const c of clients.values()) await c.end().catch(() => undefined);
      await db.stop();
    },
  };
}

export type NodeProcess = {
  name: string;
  child: ChildProcess;
  /** `http://127.0.0.1:<port>`: the internal port (and `/metrics`). */
  url: string;
  /** Where the node keeps repository `<id>.<kind>`. */
  repoDir: string;
  /** The node's Prometheus text. */
  metrics: () => Promise<string>;
  /** SIGTERM (its graceful stop; SIGKILL after 15 s). */
  close: () => Promise<void>;
};

/**
 * Starts `node src/cli.ts storage` named `name` with its volume under `dir`, registered in the
 * database at `databaseUrl`; `env` adds settings (the blob store's `TRIAD_S3_*` for backups).
 */
export async function startNodeProcess(o: {
  name: string;
  dir: string;
  databaseUrl: string;
  secret: string;
  env?: Record<string, string>;
  nodeArgs?: string[];
}): Promise<NodeProcess> {
  const port = await freePort();
  const repoDir = path.join(o.dir, 'repos');
  await fs.mkdir(path.join(o.dir, 'spool'), { recursive: true });
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), 'src/cli.ts', 'storage'], {
    cwd: ROOT,
    env: {
      ...baseEnv(),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: o.databaseUrl,
      TRIAD_STORAGE_SECRET: o.secret,
      TRIAD_STORAGE_NAME: o.name,
      TRIAD_STORAGE_PORT: String(port),
      TRIAD_REPO_DIR: repoDir,
      TRIAD_DATA_DIR: path.join(o.dir, 'data'),
      TRIAD_TRANSPORT_SPOOL_DIR: path.join(o.dir, 'spool'),
      ...o.env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const close = async () => {
    if (gone()) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await waitReady(url, gone);
  } catch (e) {
    await close();
    throw e;
  }
  const metrics = async () => (await fetch(`${url}/metrics`)).text();
  return { name: o.name, child, url, repoDir, metrics, close };
}

/**
 * Registers generated repository `from` as `org/name` on a server in `TRIAD_STORAGE=nodes` mode
 * and puts it on `node`: created through the API (the server places it and the node it picked
 * makes an empty one), the copy put in `node`'s directory as `<id>.<kind>`, then the row pointed
 * at `node` in SQL (before any read, so no server has looked it up yet). Answers its id.
 */
export async function registerOnNode(o: {
  server: ServerProcess;
  api: ApiCall;
  org: string;
  name: string;
  vcs: VcsKind;
  from: string;
  node: NodeProcess;
  sql: (text: string, values: unknown[]) => Promise<unknown>;
}): Promise<number> {
  const onNode = {
    ...o.server,
    storePath: (id: number, vcs: VcsKind) => path.join(o.node.repoDir, `${id}.${vcs}`),
  };
  const id = await registerGenerated(onNode, o.api, o.org, o.name, o.vcs, o.from);
  await o.sql('update repos set storage_node = $1 where id = $2', [o.node.name, id]);
  return id;
}

/** A node's requests so far (count, seconds) and of those its clone URL requests (`backend`). */
export type NodeCounts = { count: number; seconds: number; backend: number };

/**
 * The node's requests so far, from its metrics: of `route` (as the node labels it), or all but
 * the probes and /metrics.
 */
export const nodeCounter = (n: NodeProcess, route?: string) => async (): Promise<NodeCounts> => {
  const text = await n.metrics();
  const labels: Record<string, string> = route === undefined ? {} : { route };
  const skip = route === undefined ? (l: string) => l.includes('route="/') : undefined;
  const count = (name: string, only = labels) =>
    metricSum(text, `triad_storage_request_duration_seconds_${name}`, only, skip);
  return { count: count('count'), seconds: count('sum'), backend: count('count', { route: 'backend' }) };
};

/**
 * The sum of a metric's samples in Prometheus text whose labels include every `labels` pair
 * (`name` exactly: `foo_sum`, `foo_count`, `foo_total`); `skip` drops samples by their label text.
 */
export function metricSum(
  text: string,
  name: string,
  labels: Record<string, string> = {},
  skip?: (labelText: string) => boolean,
): number {
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? ([^ ]+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const l = m[2] ?? '';
    if (Object.entries(labels).some(([k, v]) => !l.includes(`${k}="${v}"`))) continue;
    if (skip?.(l) === true) continue;
    total += Number(m[3]);
  }
  return total;
}
