/**
 * Storage nodes and servers as real processes on loopback (docs/storage.md): one fresh database,
 * a MinIO for the backups, nodes with a repository directory each, and servers in
 * `TRIAD_STORAGE=nodes` mode with no repository directory of their own. Nodes can be killed
 * (SIGKILL), restarted on the same port and volume, and have their volume deleted.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../../src/db/database.ts';
import { cli, randomToken, serve, type Proc, type Served } from './serve.ts';
import { freshDatabase } from './server.ts';
import { startMinio, type MinioServer } from './minio.ts';
import { tempDir } from './vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

export type StorageNodeProc = Proc & {
  name: string;
  port: number;
  url: string;
  dir: string;
  env: Record<string, string>;
};

export type Cluster = {
  db: string;
  minio: MinioServer;
  secret: string;
  adminToken: string;
  nodes: StorageNodeProc[];
  servers: Served[];
  /** Environment shared by every process (database, S3, secret). */
  env: Record<string, string>;
  startNode(name: string, port?: number, dir?: string): Promise<StorageNodeProc>;
  startServer(): Promise<Served>;
  /** The names of the nodes whose volume holds repository `id` (a server holds none). */
  holders(id: number, vcs: VcsKind): Promise<string[]>;
  /** `triad <args>` with the cluster's environment (and `extra`), to its end. */
  run(args: string[], extra?: Record<string, string>): Promise<{ code: number | null; output: string }>;
  stop(): Promise<void>;
};

async function waitReady(p: Proc, url: string, what: string): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      throw new Error(`${what} exited:\n${p.output()}`);
    const r = await fetch(`${url}/readyz`).catch(() => undefined);
    if (r?.status === 200) return;
    if (Date.now() - started > 60_000) throw new Error(`${what} not ready:\n${p.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function startCluster(opts: { nodes: number; servers: number }): Promise<Cluster> {
  const db = await freshDatabase();
  const minio = await startMinio();
  const secret = randomBytes(24).toString('hex');
  const adminToken = randomToken('adm_');
  const env: Record<string, string> = {
    DATABASE_URL: db,
    TRIAD_STORAGE_SECRET: secret,
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: `b${randomBytes(4).toString('hex')}`,
    TRIAD_BACKEND_NICE: '0',
    TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '5',
  };
  const dirs: string[] = [];
  const c: Cluster = {
    db,
    minio,
    secret,
    adminToken,
    nodes: [],
    servers: [],
    env,
    async startNode(name, port, dir) {
      port ??= await freePort();
      if (dir === undefined) {
        dir = await tempDir();
        dirs.push(dir);
      }
      const nodeEnv = {
        ...env,
        HOST: '127.0.0.1',
        TRIAD_STORAGE_NAME: name,
        TRIAD_STORAGE_PORT: String(port),
        TRIAD_REPO_DIR: path.join(dir, 'repos'),
        TRIAD_DATA_DIR: path.join(dir, 'data'),
        TRIAD_TRANSPORT_SPOOL_DIR: path.join(dir, 'spool'),
        LOG_LEVEL: 'info',
      };
      const p = cli(['storage'], nodeEnv);
      const url = `http://127.0.0.1:${port}`;
      await waitReady(p, url, `storage node ${name}`);
      const n = { ...p, name, port, url, dir, env: nodeEnv };
      c.nodes.push(n);
      return n;
    },
    async startServer() {
      const data = await tempDir();
      dirs.push(data);
      const s = await serve(
        {
          ...env,
          TRIAD_STORAGE: 'nodes',
          TRIAD_DATA_DIR: data,
          TRIAD_TRANSPORT_SPOOL_DIR: path.join(data, 'spool'),
          TRIAD_EMBEDDED_AGENT: 'off',
        },
        adminToken,
      );
      c.servers.push(s);
      return s;
    },
    async holders(id, vcs) {
      const out: string[] = [];
      for (const n of c.nodes) {
        const file = path.join(n.dir, 'repos', `${id}.${vcs}`);
        if (
          await fs.stat(file).then(
            () => true,
            () => false,
          )
        )
          out.push(n.name);
      }
      return out;
    },
    async run(args, extra = {}) {
      const p = cli(args, { ...env, ...extra });
      const code = await p.exited;
      return { code, output: p.output() };
    },
    async stop() {
      for (const p of [...c.servers, ...c.nodes]) {
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill('SIGKILL');
          await p.exited;
        }
      }
      await minio.stop();
      for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
    },
  };
  for (let i = 0; i < opts.nodes; i += 1) await c.startNode(`node-${String.fromCharCode(97 + i)}`);
  for (let i = 0; i < opts.servers; i += 1) await c.startServer();
  return c;
}
