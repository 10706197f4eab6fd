/**
 * The services of one server process and how they are wired together (`createServices`).
 */
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { type Orm } from './db/database.ts';
import type { Metrics } from './telemetry/metrics.ts';
import { UsersService } from './users/service.ts';
import { OrgsService } from './orgs/service.ts';
import { RawCache } from './repos/raw-cache.ts';
import { ReposService } from './repos/service.ts';
import { RepoChanges } from './repos/changes.ts';
import { CommitRevs } from './repos/commit-revs.ts';
import { ContentsService } from './repos/contents-service.ts';
import { CompareService } from './repos/compare.ts';
import { RefsService } from './repos/refs.ts';
import { TokenTargets } from './repos/targets.ts';
import { createVcs, type Vcs } from './vcs/index.ts';
import { ProcessPool } from './vcs/process/pool.ts';
import { Spool } from './vcs/process/spool.ts';
import { TransportServers } from './vcs/transport.ts';
import { AgentsService } from './agents/service.ts';
import { PipelinesService } from './pipelines/service.ts';
import { IssuesService } from './issues/service.ts';
import { PullsService } from './pulls/service.ts';
import { StatusesService } from './statuses/service.ts';
import { listRules } from './protection/repository.ts';
import { Mergeability } from './pulls/mergeability.ts';
import { WebhooksService } from './webhooks/service.ts';
import { ProtectionsService } from './protection/service.ts';
import { Dispatcher } from './webhooks/delivery/dispatcher.ts';
import { webhookLookups } from './webhooks/envelope.ts';
import { openBlobStore, type BlobStore } from './storage/index.ts';
import { ReleasesService } from './releases/service.ts';
import { SearchService } from './search/service.ts';
import { SessionsService } from './web/sessions.ts';
import path from 'node:path';
import { StorageNodes } from './storage-node/service.ts';
import { StorageClient } from './vcs/remote/client.ts';
import { createRemoteVcs } from './vcs/remote/vcs.ts';
import { TransportMetrics } from './telemetry/transport-metrics.ts';
import { MeteredBlobStore } from './storage/metered.ts';
import { observeDbPools, ormPool } from './telemetry/db-pool-metrics.ts';
import { ClusterLease } from './telemetry/cluster-lease.ts';

export type Services = {
  users: UsersService;
  orgs: OrgsService;
  repos: ReposService;
  agents: AgentsService;
  pipelines: PipelinesService;
  issues: IssuesService;
  webhooks: WebhooksService;
  protections: ProtectionsService;
  /** Delivers webhooks from the outbox; started and stopped by the server. */
  webhookDispatcher: Dispatcher;
  changes: RepoChanges;
  pulls: PullsService;
  /** Commit statuses (clients' and the pipelines' own), pull request checks and the merge gate. */
  statuses: StatusesService;
  /** The VCS drivers, operations and pooled readers (the persistent processes); closed at shutdown. */
  vcs: Vcs;
  /** The clone URLs' concurrency cap and pooled backend workers; closed at shutdown. */
  transports: TransportServers;
  /** The transfers' per-process spool directory: made at start, removed at shutdown. */
  spool: Spool;
  releases: ReleasesService;
  /** Issue and pull request search (the issues and pulls services' full-text reads). */
  search: SearchService;
  /** Larger raw downloads kept for the next (TRIAD_RAW_CACHE_BYTES); none when off. */
  rawCache: RawCache | undefined;
  /** Web sessions (the cookie's id, lifetimes, revocation). */
  sessions: SessionsService;
  /** Repository contents (tree, blob, raw, log, changeset) through the pooled readers. */
  contents: ContentsService;
  /** Branch, bookmark and tag lists. */
  refs: RefsService;
  /** Three-dot compares (commits and files between two refs or commits). */
  compare: CompareService;
  /** With `TRIAD_STORAGE=nodes`: the node registry and the client of the nodes' internal port. */
  storage: { nodes: StorageNodes; client: StorageClient } | undefined;
  /** The replica that exports the cluster-wide gauges holds it; released at shutdown. */
  clusterLease: ClusterLease;
};

export type AppDeps = {
  config: Config;
  orm: Orm;
  log: Logger;
  metrics: Metrics;
  baseUrl: () => string;
  /** For session-level connections (LISTEN, push locks): DATABASE_DIRECT_URL when set (db/settings.ts). */
  databaseUrl: string;
};

/** The blob store of step logs and release assets: S3/MinIO when configured, else files. */
export function blobStore(config: Config): BlobStore {
  return openBlobStore(config.blobs);
}

/** Wires the services together. Each service takes the request-scoped entity manager through `em`. */
export function createServices(deps: AppDeps): Services {
  const em = () => deps.orm.em;
  const pool = new ProcessPool();
  const localVcs = createVcs({ pool, tmpDir: path.join(deps.config.dataDir, 'tmp') });
  // With storage nodes, every call naming a repository goes to its node (vcs/remote/).
  const storage: Services['storage'] =
    deps.config.storage.mode === 'nodes'
      ? ((): NonNullable<Services['storage']> => {
          const nodes = new StorageNodes({ em });
          const client: StorageClient = new StorageClient({
            secret: deps.config.storage.secret ?? '',
            locator: nodes.locator((id: number): Promise<string | undefined> => repos.storageNodeOf(id)),
          });
          return { nodes, client };
        })()
      : undefined;
  const vcs: Vcs =
    storage === undefined ? localVcs : createRemoteVcs({ client: storage.client, local: localVcs });
  const sessions = new SessionsService({ em, ...deps.config.sessions });
  const users: UsersService = new UsersService({
    em,
    maxTokensPerUser: deps.config.maxTokensPerUser,
    // a new password ends the user's web sessions (but the one that set it)
    onPasswordChange: (tx, userId, keep) => sessions.endAll(tx, userId, keep),
    // token targets are named by organization and repository (`TokenTargets`, made below)
    targets: {
      resolve: (level, target, userId) => tokenTargets.resolve(level, target, userId),
      names: (t) => tokenTargets.names(t),
    },
  });
  const orgs = new OrgsService({ em, users, maxOrgsPerUser: deps.config.maxOrgsPerUser });
  const rawCache = deps.config.rawCache.maxBytes > 0 ? new RawCache(deps.config.rawCache) : undefined;
  const repos: ReposService = new ReposService({
    em,
    orgs,
    repoDir: deps.config.repoDir,
    baseUrl: deps.baseUrl,
    vcs,
    ...(rawCache === undefined ? {} : { forget: (dir: string) => rawCache.forget(dir) }),
    ...(storage === undefined ? {} : { placement: storage.nodes }),
  });
  const tokenTargets = new TokenTargets({ orgs, repos });
  const agents = new AgentsService({ em });
  const blobs = new MeteredBlobStore(blobStore(deps.config), deps.metrics);
  const statuses: StatusesService = new StatusesService({
    em,
    log: deps.log,
    users,
    repos,
    baseUrl: deps.baseUrl,
    resolve: (t, rev) => contents.commit(t, rev),
    rules: listRules,
  });
  const pipelines = new PipelinesService({
    em,
    blobs,
    log: deps.log,
    metrics: deps.metrics,
    databaseUrl: deps.databaseUrl,
    agentTimeoutMs: deps.config.agentTimeoutMs,
    stepTimeoutSeconds: deps.config.stepTimeoutSeconds,
    logMaxBytes: deps.config.stepLogMaxBytes,
    baseUrl: deps.baseUrl,
    limits: deps.config.pipelineLimits,
    repos,
    users,
    agents,
    housekeeping: deps.config.housekeeping,
    onStatus: (tx, ids) => statuses.recordPipelines(tx, ids),
  });
  const revs = new CommitRevs({ em, vcs });
  const contents = new ContentsService(repos, vcs, deps.config.limits, {
    nice: deps.config.backendNice,
    revs,
    ...(rawCache === undefined ? {} : { cache: rawCache }),
  });
  const issues = new IssuesService({
    em,
    users,
    orgs,
    maxAssignees: deps.config.issueMaxAssignees,
    maxPinned: deps.config.maxPinnedIssues,
    repos,
    contents,
  });
  const { concurrency, queue, hgWorkers, hgStreamClones } = deps.config.transport;
  const transportMetrics = new TransportMetrics(deps.metrics);
  observeDbPools(deps.metrics, { main: ormPool(deps.orm) });
  const clusterLease = new ClusterLease({ em, log: deps.log });
  deps.metrics.electWith(() => clusterLease.holds());
  const transports = new TransportServers({
    concurrency,
    queue,
    wsgiWorkers: hgWorkers,
    wsgiEnv: { TRIAD_HG_STREAM_CLONES: hgStreamClones },
    nice: deps.config.backendNice,
    timeoutMs: deps.config.transport.timeoutMs,
    pool,
    metrics: transportMetrics,
  });
  const lookups = webhookLookups({ em, users, repos });
  const webhookDispatcher = new Dispatcher({
    em,
    databaseUrl: deps.databaseUrl,
    log: deps.log.child({ component: 'webhooks' }),
    metrics: deps.metrics,
    settings: deps.config.webhooks,
    lookups,
  });
  const webhooks = new WebhooksService({
    em,
    settings: deps.config.webhooks,
    lookups,
    wake: () => webhookDispatcher.wake(),
  });
  const changes = new RepoChanges({
    em,
    log: deps.log,
    baseUrl: deps.baseUrl,
    // with storage nodes a server has no repository volume: its markers stay in its data directory
    markerDir:
      storage === undefined
        ? path.join(deps.config.repoDir, '.triad-pushes')
        : path.join(deps.config.dataDir, 'push-markers'),
    repos,
    metrics: transportMetrics,
    lockUrl: deps.databaseUrl,
  });
  const releases = new ReleasesService({
    em,
    log: deps.log.child({ component: 'releases' }),
    baseUrl: deps.baseUrl,
    blobs,
    users,
    repos,
    changes,
    vcs,
    assetMaxBytes: deps.config.assetMaxBytes,
    redirectDownloads: deps.config.blobs.redirectDownloads,
    archives: transports,
    retryAfterSeconds: deps.config.transport.retryAfterSeconds,
  });
  const compare = new CompareService(repos, vcs, deps.config.limits);
  const protections = new ProtectionsService({ em, users });
  const pulls: PullsService = new PullsService({
    em,
    log: deps.log,
    users,
    repos,
    changes,
    vcs,
    compare,
    mergeability: new Mergeability({
      ops: (kind) => vcs.ops(kind),
      budgetMs: deps.config.pullCheckBudgetMs,
      onError: (err) => deps.log.warn({ err }, 'mergeability check failed'),
    }),
    ci: pipelines,
    checks: statuses,
    protections,
  });
  changes.listen(revs.listener, pulls.sync, pipelines.triggers, {
    phase: 'committed',
    // the next read after a push starts with fresh reader processes and caches
    onCommitted: (repo) => vcs.invalidate(repo.path),
  });
  return {
    users,
    orgs,
    repos,
    agents,
    pipelines,
    issues,
    webhooks,
    protections,
    webhookDispatcher,
    changes,
    pulls,
    statuses,
    vcs,
    transports,
    spool: new Spool(deps.config.transport.spoolDir),
    releases,
    search: new SearchService({ issues: issues.reads, pulls: pulls.reads }),
    rawCache,
    sessions,
    contents,
    refs: new RefsService(repos, vcs, revs),
    compare,
    storage,
    clusterLease,
  };
}
