/**
 * `triad storage`: a storage node (docs/storage.md). Owns the repositories under TRIAD_REPO_DIR
 * (its own volume), serves them to the servers on TRIAD_STORAGE_PORT (wire protocol in
 * vcs/remote/wire.ts), registers itself in PostgreSQL and heartbeats, and backs up every change
 * to the blob store when one is configured. SIGTERM: stops accepting, lets running requests end
 * (within TRIAD_SHUTDOWN_TIMEOUT_SECONDS), exits 0.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import client from 'prom-client';
import type { Logger } from 'pino';
import { loadConfig, type Config } from '../config.ts';
import { migrate, openOrm, type Orm } from '../db/database.ts';
import { poolOptions } from '../db/settings.ts';
import { openBlobStore, type BlobStore } from '../storage/index.ts';
import { createLogger } from '../telemetry/logger.ts';
import { createVcs } from '../vcs/index.ts';
import { ProcessPool } from '../vcs/process/pool.ts';
import { Spool } from '../vcs/process/spool.ts';
import { TransportServers } from '../vcs/transport.ts';
import { PROTOCOL_VERSION } from '../vcs/remote/wire.ts';
import { nodeBackups } from './backups.ts';
import { sweepLeftovers } from './copies.ts';
import { StorageNodeServer } from './server.ts';
import { StorageNodes } from './service.ts';

const HEARTBEAT_MS = 5_000;

export type RunningNode = { url: string; port: number; close: () => Promise<void> };

/** What a node works with beyond its HTTP server: the database and the blob store. */
export async function openNodeResources(
  config: Config,
  log: Logger,
): Promise<{ orm: Orm; blob: BlobStore | undefined }> {
  if (config.databaseUrl === undefined)
    throw new Error('a storage node needs DATABASE_URL (it registers itself there)');
  if (config.storage.secret === undefined) throw new Error('a storage node needs TRIAD_STORAGE_SECRET');
  const orm = await openOrm(config.databaseUrl, poolOptions(config.database, 4));
  await migrate(config.database.directUrl ?? config.databaseUrl, orm);
  let blob: BlobStore | undefined;
  if (config.blobs.s3 !== undefined) {
    blob = openBlobStore(config.blobs);
    await blob.init();
  } else log.warn('no TRIAD_S3_ENDPOINT: this node writes no backups');
  return { orm, blob };
}

export async function startStorageNode(config: Config, log: Logger): Promise<RunningNode> {
  const root = config.repoDir;
  await fs.mkdir(root, { recursive: true });
  await sweepLeftovers(root);
  const { orm, blob } = await openNodeResources(config, log);
  const pool = new ProcessPool();
  const tmpDir = path.join(root, '.tmp');
  const vcs = createVcs({ pool, tmpDir });
  const t = config.transport;
  const servers = new TransportServers({
    concurrency: t.concurrency,
    queue: t.queue,
    wsgiWorkers: t.hgWorkers,
    wsgiEnv: { TRIAD_HG_STREAM_CLONES: t.hgStreamClones },
    nice: config.backendNice,
    timeoutMs: t.timeoutMs,
    pool,
  });
  const spool = new Spool(t.spoolDir);
  await spool.open();
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'triad_storage_' });
  const requests = new client.Histogram({
    name: 'triad_storage_request_duration_seconds',
    help: 'Internal requests a storage node served, by route and outcome',
    labelNames: ['route', 'outcome'],
    buckets: [0.0005, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30],
    registers: [registry],
  });
  const backups = blob === undefined ? undefined : nodeBackups({ blob, tmpDir, registry, log });
  let ready = false;
  const node = new StorageNodeServer({
    root,
    vcs,
    servers,
    spool,
    log,
    secret: config.storage.secret!,
    timeoutMs: t.timeoutMs,
    ...(backups === undefined ? {} : { backup: backups.backup, dropBackup: backups.drop }),
    ready: () => ready,
    metrics: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
    observe: (route, outcome, seconds) => requests.observe({ route, outcome }, seconds),
  });
  // a push's protection rules travel in a header (BACKEND.protection): room for many rules
  const server = http.createServer({ maxHeaderSize: 256 * 1024 }, node.handle);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.storage.port, config.host, resolve);
  });
  const port = (server.address() as { port: number }).port;
  const loopback = ['127.0.0.1', 'localhost', '::1'].includes(config.host);
  const address = config.storage.address ?? `http://${loopback ? '127.0.0.1' : os.hostname()}:${port}`;
  const nodes = new StorageNodes({ em: () => orm.em });
  const room = async () => {
    const s = await fs.statfs(root);
    return { capacityBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize };
  };
  await nodes.register({ name: config.storage.name, address, version: PROTOCOL_VERSION, ...(await room()) });
  ready = true;
  const beat = setInterval(() => {
    room()
      .then((r) => nodes.heartbeat(config.storage.name, r))
      .catch((err: unknown) => log.warn({ err }, 'storage node heartbeat failed'));
  }, HEARTBEAT_MS);
  beat.unref();
  log.info(
    { name: config.storage.name, address, root },
    `storage node ${config.storage.name} listening on ${address}`,
  );
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      clearInterval(beat);
      ready = false;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      servers.close();
      await vcs.close(2000);
      await spool.close();
      await orm.close();
    },
  };
}

/** Process entry of `triad storage`. */
export async function runStorageNode(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel, { format: config.logFormat }).child({ component: 'storage' });
  const running = await startStorageNode(config, log);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'storage node shutting down: draining in-flight requests');
    setTimeout(() => process.exit(0), config.shutdownTimeoutMs).unref();
    running.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
