/**
 * The services of one server process and how they are wired together (`createServices`), and the
 * directory the authentication layer looks users, agents, organizations and repositories up in.
 */
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { type Orm } from './db/database.ts';
import { type Directory } from './http/auth.ts';
import { ApiError } from './http/errors.ts';
import type { Metrics } from './telemetry/metrics.ts';
import { UsersService, type TargetDirectory } from './users/service.ts';
import { OrgsService } from './orgs/service.ts';
import { RawCache } from './repos/raw-cache.ts';
import { ReposService } from './repos/service.ts';
import { RepoChanges } from './repos/changes.ts';
import { createVcs, type Vcs } from './vcs/index.ts';
import { ProcessPool } from './vcs/process/pool.ts';
import { Spool } from './vcs/process/spool.ts';
import { TransportServers } from './vcs/transport.ts';
import { AgentsService } from './agents/service.ts';
import { PipelinesService } from './pipelines/service.ts';
import { IssuesService } from './issues/service.ts';
import { PullsService } from './pulls/service.ts';
import { Mergeability } from './pulls/mergeability.ts';
import type { Trigger } from './pipelines/model.ts';
import { WebhooksService } from './webhooks/service.ts';
import { Dispatcher } from './webhooks/delivery/dispatcher.ts';
import { webhookLookups } from './webhooks/envelope.ts';
import { openBlobStore, type BlobStore } from './storage/index.ts';
import { ReleasesService } from './releases/service.ts';
import path from 'node:path';

export type Services = {
  users: UsersService;
  orgs: OrgsService;
  repos: ReposService;
  agents: AgentsService;
  pipelines: PipelinesService;
  issues: IssuesService;
  webhooks: WebhooksService;
  /** Delivers webhooks from the outbox; started and stopped by the server. */
  webhookDispatcher: Dispatcher;
  changes: RepoChanges;
  pulls: PullsService;
  /** The VCS drivers, operations and pooled readers (the persistent processes); closed at shutdown. */
  vcs: Vcs;
  /** The clone URLs' concurrency cap and pooled backend workers; closed at shutdown. */
  transports: TransportServers;
  /** The transfers' per-process spool directory: made at start, removed at shutdown. */
  spool: Spool;
  releases: ReleasesService;
  /** Larger raw downloads kept for the next (TRIAD_RAW_CACHE_BYTES); none when off. */
  rawCache: RawCache | undefined;
};

export type AppDeps = {
  config: Config;
  orm: Orm;
  log: Logger;
  metrics: Metrics;
  baseUrl: () => string;
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
  const vcs = createVcs({ pool, tmpDir: path.join(deps.config.dataDir, 'tmp') });
  const users: UsersService = new UsersService({
    em,
    maxTokensPerUser: deps.config.maxTokensPerUser,
    targets: {
      resolve: (level, target, userId) => resolveTarget(level, target, userId),
      names: (t) => targetNames(t),
    },
  });
  const orgs = new OrgsService({ em, users, maxOrgsPerUser: deps.config.maxOrgsPerUser });
  const rawCache = deps.config.rawCache.maxBytes > 0 ? new RawCache(deps.config.rawCache) : undefined;
  const repos = new ReposService({
    em,
    orgs,
    repoDir: deps.config.repoDir,
    baseUrl: deps.baseUrl,
    vcs,
    ...(rawCache === undefined ? {} : { forget: (dir: string) => rawCache.forget(dir) }),
  });
  const resolveTarget: TargetDirectory['resolve'] = async (level, target, userId) => {
    const [orgName, repoName, ...rest] = target.split('/');
    const wantRepo = level === 'repo';
    if (
      orgName === undefined ||
      rest.length > 0 ||
      (wantRepo ? repoName === undefined : repoName !== undefined)
    ) {
      throw ApiError.validation(
        `body.target: must be ${wantRepo ? '"org/repo"' : '"org"'} for a ${level} token`,
      );
    }
    const org = await orgs.ref(orgName);
    const role = org === undefined ? undefined : await orgs.role(org.id, userId);
    if (org === undefined || role === undefined) throw ApiError.notFound('target organization');
    if (!wantRepo) return { orgId: org.id, repoId: null };
    const repo = await repos.ref(org, repoName ?? '');
    if (repo === undefined) throw ApiError.notFound('target repository');
    return { orgId: org.id, repoId: repo.id };
  };
  // A token's target as `org` or `org/repo` (a target deleted since names nothing: the token went with it).
  const targetNames: TargetDirectory['names'] = async (targets) => {
    const orgNames = await orgs.names(targets.flatMap((t) => (t.orgId === null ? [] : [t.orgId])));
    const repoNames = await repos.names(targets.flatMap((t) => (t.repoId === null ? [] : [t.repoId])));
    return targets.map((t) => {
      if (t.orgId === null) return null;
      const org = orgNames.get(t.orgId) ?? '';
      return t.repoId === null ? org : `${org}/${repoNames.get(t.repoId) ?? ''}`;
    });
  };
  const agents = new AgentsService({ em });
  const blobs = blobStore(deps.config);
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
    readFiles: async (repoId, revs, file, maxBytes) => {
      const repo = await repos.get(repoId);
      return vcs.driver(repo.vcs).filesAt(repos.path(repo), revs, file, maxBytes);
    },
    repoInfo: async (repoId) => {
      const repo = await repos.get(repoId);
      const org = await orgs.byId(repo.orgId);
      return {
        id: repo.id,
        name: repo.name,
        orgId: org.id,
        org: org.name,
        vcs: repo.vcs,
        isPrivate: repo.isPrivate,
      };
    },
    users,
    agents,
  });
  const issues = new IssuesService({ em, users, orgs, maxAssignees: deps.config.issueMaxAssignees });
  const { concurrency, queue, hgWorkers, hgStreamClones } = deps.config.transport;
  const transports = new TransportServers({
    concurrency,
    queue,
    wsgiWorkers: hgWorkers,
    wsgiEnv: { TRIAD_HG_STREAM_CLONES: hgStreamClones },
    nice: deps.config.backendNice,
    timeoutMs: deps.config.transport.timeoutMs,
    pool,
  });
  const lookups = webhookLookups({ orm: deps.orm, users, orgs, repos });
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
    markerDir: path.join(deps.config.repoDir, '.triad-pushes'),
    vcs,
    repoById: async (id) => {
      const repo = await repos.get(id).catch((e: unknown) => {
        if (e instanceof ApiError && e.status === 404) return undefined; // deleted since
        throw e;
      });
      if (repo === undefined) return undefined;
      return repos.changed(repo, (await orgs.byId(repo.orgId)).name);
    },
    // the next read after a push starts with fresh reader processes and caches
    onChanged: (repo) => vcs.invalidate(repo.path),
    // Pull requests first (source pushes, manual merges; their own savepoint), then one CI
    // trigger call, so a commit reached by a push and a pull request gets one pipeline.
    onRefMoves: async (tx, repo, moves, senderId) => {
      let prTriggers: Trigger[] = [];
      try {
        prTriggers = await tx.transactional((sp) => pulls.sync.refsMoved(sp, repo, moves, senderId));
      } catch (err) {
        deps.log.error({ err, repo: repo.id }, 'pull request updates after a push failed');
      }
      const pushTriggers = moves.map((m): Trigger =>
        m.type === 'tag'
          ? { commit: m.target, event: 'tag', branch: '', tag: m.name, senderId }
          : { commit: m.head, event: 'push', branch: m.name, tag: '', senderId },
      );
      return pipelines.trigger(tx, repo.id, [...pushTriggers, ...prTriggers]);
    },
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
  const pulls: PullsService = new PullsService({
    em,
    log: deps.log,
    users,
    repos,
    changes,
    vcs,
    mergeability: new Mergeability({
      ops: (kind) => vcs.ops(kind),
      budgetMs: deps.config.pullCheckBudgetMs,
      onError: (err) => deps.log.warn({ err }, 'mergeability check failed'),
    }),
    trigger: (tx, repoId, triggers) => pipelines.trigger(tx, repoId, triggers),
  });
  return {
    users,
    orgs,
    repos,
    agents,
    pipelines,
    issues,
    webhooks,
    webhookDispatcher,
    changes,
    pulls,
    vcs,
    transports,
    spool: new Spool(deps.config.transport.spoolDir),
    releases,
    rawCache,
  };
}

export function directory(s: Services): Directory {
  return {
    userByTokenHash: (hash) => s.users.userByTokenHash(hash),
    agentByTokenHash: (hash) => s.agents.byTokenHash(hash),
    orgByName: (name) => s.orgs.ref(name),
    repoByNames: (orgName, name) => s.repos.target(orgName, name),
    role: (orgId, userId) => s.orgs.role(orgId, userId),
  };
}
