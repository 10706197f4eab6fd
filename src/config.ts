import { withSecrets } from './secrets.ts';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { corsOrigins, trustProxy } from './http/proxy-settings.ts';
import { durationVar, webhookEnv, webhookSettings, type WebhookSettings } from './webhooks/settings.ts';
import { sandboxEnvShape, sandboxOptions, size, type SandboxOptions } from '../agent/executors/sandbox.ts';
import { parseDuration } from './pipelines/pipeline-file.ts';
import type { PipelineLimits } from './pipelines/model.ts';
import type { S3Settings } from './storage/index.ts';
import { LOG_FORMATS, type LogFormat } from './telemetry/logger.ts';
import { API_VARIANTS, type ApiVariant } from './domain/variant.ts';
import { storageEnvShape, storageSettings, type StorageSettings } from './storage-node/settings.ts';
import { databaseEnvShape, databaseSettings, type DatabaseSettings } from './db/settings.ts';
import {
  housekeepingEnv,
  housekeepingSettings,
  type HousekeepingSettings,
} from './pipelines/housekeeping-settings.ts';

const stepTimeout = z.string().transform((v, ctx) => {
  const seconds = parseDuration(v, true);
  if (seconds === undefined || seconds < 1) {
    ctx.addIssue({ code: 'custom', message: 'must be seconds or a duration such as 90s, 30m or 2h' });
    return z.NEVER;
  }
  return seconds;
});

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v === '' ? undefined : v));

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  TRIAD_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  TRIAD_BASE_URL: optionalString.refine(
    (v) => v === undefined || /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(v),
    'must be an http(s) URL without query or fragment',
  ),
  TRIAD_DATA_DIR: z.string().default('./data'),
  DATABASE_URL: optionalString,
  ...databaseEnvShape,
  TRIAD_REPO_DIR: optionalString,
  TRIAD_ADMIN_USERNAME: optionalString,
  TRIAD_ADMIN_EMAIL: optionalString,
  TRIAD_ADMIN_TOKEN: optionalString,
  TRIAD_OPERATOR_TOKEN: optionalString,
  TRIAD_AGENT_TOKEN: optionalString,
  TRIAD_EMBEDDED_AGENT: z.enum(['local', 'off']).optional(),
  TRIAD_AGENT_TIMEOUT: z.coerce.number().positive().default(60),
  TRIAD_STEP_TIMEOUT: stepTimeout.default(3600),
  TRIAD_STEP_LOG_MAX_BYTES: size(4096).default(16 * 1024 * 1024),
  TRIAD_PIPELINE_TIMEOUT: stepTimeout.default(7200),
  TRIAD_PIPELINE_MAX_STEPS: z.coerce.number().int().min(1).max(1000).default(50),
  TRIAD_STEP_DISK_MAX: size(1024 * 1024).default(10 * 1024 ** 3),
  TRIAD_PIPELINE_FILE_MAX_BYTES: size(1024).default(256 * 1024),
  TRIAD_AGENT_WORK_DIR: optionalString,
  ...sandboxEnvShape,
  TRIAD_BODY_LIMIT: z.string().default('1mb'),
  TRIAD_SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().positive().default(25),
  TRIAD_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(1000),
  TRIAD_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(0).default(256),
  TRIAD_FIRST_REQUEST_TIMEOUT_SECONDS: z.coerce.number().positive().max(3600).default(10),
  TRIAD_IDLE_GC_SECONDS: z.coerce.number().min(0).max(3600).default(10),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString,
  OTEL_SERVICE_NAME: z.string().default('triad'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(LOG_FORMATS).default('auto'),
  TRIAD_LOG_REQUESTS: bool.default(true),
  TRIAD_ISSUE_MAX_ASSIGNEES: z.coerce.number().int().min(1).max(1000).default(10),
  TRIAD_MAX_PINNED_ISSUES: z.coerce.number().int().min(1).max(100).default(3),
  TRIAD_PULL_CHECK_BUDGET_MS: z.coerce.number().int().min(0).max(600_000).default(400),
  TRIAD_BLOB_MAX_BYTES: size(1).default(4 * 1024 * 1024),
  TRIAD_DIFF_MAX_FILE_BYTES: size(1).default(1024 * 1024),
  TRIAD_DIFF_MAX_BYTES: size(1).default(4 * 1024 * 1024),
  TRIAD_RAW_SOCKET_HANDOFF: bool.default(true),
  TRIAD_RAW_CACHE_BYTES: size(0).default(1024 * 1024 * 1024),
  TRIAD_RAW_CACHE_DIR: optionalString,
  TRIAD_MAX_TOKENS_PER_USER: z.coerce.number().int().min(1).default(100),
  TRIAD_MAX_ORGS_PER_USER: z.coerce.number().int().min(0).default(50),
  TRIAD_AUTH_FAILURE_LIMIT: z.coerce.number().int().min(0).default(10),
  TRIAD_AUTH_FAILURE_WINDOW_SECONDS: z.coerce.number().positive().default(60),
  TRIAD_TRUST_PROXY: trustProxy.default(false),
  TRIAD_CORS_ORIGINS: corsOrigins.default([]),
  TRIAD_API_VARIANT: z.enum(API_VARIANTS).default('current'),
  ...storageEnvShape,
  ...webhookEnv,
  ...housekeepingEnv,
  TRIAD_TRANSPORT_TIMEOUT_SECONDS: z.coerce.number().positive().default(600),
  TRIAD_TRANSPORT_MAX_BODY_BYTES: size(1).default(1024 * 1024 * 1024),
  TRIAD_TRANSPORT_SPOOL_DIR: optionalString,
  TRIAD_TRANSPORT_CONCURRENCY: z.coerce.number().int().min(1).default(8),
  TRIAD_TRANSPORT_QUEUE: z.coerce.number().int().min(0).default(64),
  TRIAD_TRANSPORT_RETRY_AFTER_SECONDS: z.coerce.number().int().min(1).default(5),
  TRIAD_HG_WORKERS: z.coerce.number().int().min(1).default(4),
  TRIAD_HG_STREAM_CLONES: z.enum(['prefer', 'allow', 'off']).default('prefer'),
  TRIAD_BACKEND_NICE: z.coerce.number().int().min(0).max(19).default(10),
  TRIAD_S3_ENDPOINT: optionalString.refine(
    (v) => v === undefined || /^(https?:\/\/)?[^/?#\s:]+(:\d{1,5})?\/?$/.test(v),
    'must be host, host:port or an http(s)://host:port URL',
  ),
  TRIAD_S3_ACCESS_KEY: optionalString,
  TRIAD_S3_SECRET_KEY: optionalString,
  TRIAD_S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name')
    .default('triad'),
  TRIAD_S3_REGION: z.string().default('us-east-1'),
  TRIAD_S3_USE_SSL: bool.optional(),
  TRIAD_S3_REDIRECT_DOWNLOADS: bool.default(false),
  TRIAD_ASSET_MAX_BYTES: size(1).default(2 * 1024 * 1024 * 1024),
  TRIAD_SESSION_IDLE: durationVar('TRIAD_SESSION_IDLE').default(7 * 86_400_000),
  TRIAD_SESSION_MAX: durationVar('TRIAD_SESSION_MAX').default(30 * 86_400_000),
});

export type Config = {
  port: number;
  host: string;
  /** Port of a second listener serving only `/metrics` (then 404 on `port`); unset: `/metrics` on `port`. */
  metricsPort: number | undefined;
  /** Explicit public address; when unset it follows the port actually bound. */
  baseUrl: string | undefined;
  dataDir: string;
  databaseUrl: string | undefined;
  /** DATABASE_DIRECT_URL, DATABASE_POOL_MODE, TRIAD_DB_POOL_MAX (db/settings.ts). */
  database: DatabaseSettings;
  repoDir: string;
  admin: { username: string; email: string; token: string | undefined } | undefined;
  /** TRIAD_OPERATOR_TOKEN: ensured at start as a token of the administrator with only `agents:admin`. */
  operatorToken: string | undefined;
  agentToken: string | undefined;
  embeddedAgent: 'local' | 'off';
  /** A running pipeline whose agent is silent this long becomes `error`. */
  agentTimeoutMs: number;
  /** Default and longest step run time; a pipeline file's `timeout` may only shorten it. */
  stepTimeoutSeconds: number;
  /** Most bytes one step log keeps (head and tail; the middle is cut). */
  stepLogMaxBytes: number;
  /** Bounds of every pipeline: run time, steps, workspace size, pipeline file size. */
  pipelineLimits: PipelineLimits;
  /** Where the embedded agent makes workspaces (undefined: the executor's default). */
  agentWorkDir: string | undefined;
  /** The embedded agent's sandbox (limits, user) and whether it runs unsandboxed (opt-out). */
  sandbox: SandboxOptions & { unsandboxed: boolean };
  bodyLimit: string;
  shutdownTimeoutMs: number;
  /**
   * HTTP connections: open at most (`max`; then a small reserve for health probes, beyond it
   * closed on arrival), per client address (`perClient`, 0 = no limit; trusted proxies exempt),
   * and how long a new connection may take to send its first request (http/connections.ts).
   */
  connections: { max: number; perClient: number; firstRequestMs: number };
  /** Quiet time after requests before a grown V8 heap is collected and given back (0: never). */
  idleGcMs: number;
  /**
   * Niceness added to the processes doing bulk VCS work (clone URL backends, raw download and
   * archive processes), so they yield the CPUs to the API and the database
   * (vcs/process/priority.ts).
   */
  backendNice: number;
  otlpEndpoint: string | undefined;
  serviceName: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  /** JSON lines, or lines a person reads on a terminal (`auto`: pretty when stdout is a TTY). */
  logFormat: LogFormat;
  logRequests: boolean;
  /** Most assignees one issue may have (400 beyond, on create and on add). */
  issueMaxAssignees: number;
  /** Most pinned issues one repository may have (the web's pins; 409 beyond). */
  maxPinnedIssues: number;
  /** How long a pull request read waits for a mergeability check before answering `checking`. */
  pullCheckBudgetMs: number;
  /** Contents read caps in bytes (blob content, a file's diff section, a whole diff). */
  limits: { blobMaxBytes: number; diffMaxFileBytes: number; diffMaxBytes: number };
  /** Raw downloads (git, Mercurial) written to the connection by the reading process itself. */
  rawSocketHandOff: boolean;
  /** Larger raw downloads kept as plain files for the next (`maxBytes` 0: off); see RawCache. */
  rawCache: { dir: string; maxBytes: number };
  /** Tokens one user may hold (CI clone credentials not counted). */
  maxTokensPerUser: number;
  /** Organizations a user may own when creating another (site admins exempt). */
  maxOrgsPerUser: number;
  /** Failed authentications per client address within the window before 429 (0 = off). */
  authFailures: { limit: number; windowMs: number };
  /** express `trust proxy`: whose X-Forwarded-For names the client address. */
  trustProxy: boolean | number | string;
  /** Web origins whose pages may call the API from a browser (CORS, never with credentials); none: off. */
  corsOrigins: string[];
  /** The API variant of requests that neither a header nor their token pins (docs/api-variants.md). */
  apiVariant: ApiVariant;
  /** Storage nodes (docs/storage.md). */
  storage: StorageSettings;
  /** Webhook delivery: allowed targets, retries, deadline, auto-disable, history retention. */
  webhooks: WebhookSettings;
  /** CI housekeeping: the pipeline retention policy (off unless set) and step-log compaction. */
  housekeeping: HousekeepingSettings;
  /**
   * Clone/push at clone URLs: run time limit, request body cap, where bodies are spooled, backend
   * runs at once and waiting (503 with `Retry-After` beyond), Mercurial's pooled hgweb workers.
   */
  transport: {
    timeoutMs: number;
    maxBodyBytes: number;
    spoolDir: string;
    concurrency: number;
    queue: number;
    retryAfterSeconds: number;
    hgWorkers: number;
    /**
     * Mercurial stream clones (the store's files sent as they are): `prefer` (a plain `hg clone`
     * streams), `allow` (only `hg clone --stream` does), `off`. Never for a repository with secret
     * changesets.
     */
    hgStreamClones: 'prefer' | 'allow' | 'off';
  };
  /**
   * Blob store (step logs, release assets): S3/MinIO when `TRIAD_S3_ENDPOINT` is set, else files
   * under `dir`; `redirectDownloads`: asset downloads answer 302 to a presigned S3 URL.
   */
  blobs: { dir: string; s3: S3Settings | undefined; redirectDownloads: boolean };
  /** Largest release asset accepted (413 beyond). */
  assetMaxBytes: number;
  /** Web sessions end after this long without a request (`idleMs`), and this long after sign-in (`maxMs`). */
  sessions: { idleMs: number; maxMs: number };
};

/** Parses the environment once; a bad value fails fast with every problem listed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const all = withSecrets(env);
  // An empty variable (`PORT=` in an env file or a chart) means "unset", for every variable:
  // otherwise `PORT=` would coerce to 0 (a random port) and `LOG_LEVEL=` would be rejected.
  const present = Object.fromEntries(
    Object.entries(all).filter(([, v]) => v !== undefined && v.trim() !== ''),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.TRIAD_DATA_DIR);
  const adminWanted = e.TRIAD_ADMIN_USERNAME ?? e.TRIAD_ADMIN_TOKEN;
  const s3 = s3Settings(e);
  return {
    port: e.PORT,
    host: e.HOST,
    metricsPort: e.TRIAD_METRICS_PORT,
    baseUrl: e.TRIAD_BASE_URL?.replace(/\/+$/, ''),
    dataDir,
    databaseUrl: e.DATABASE_URL,
    database: databaseSettings(e),
    repoDir: path.resolve(e.TRIAD_REPO_DIR ?? path.join(dataDir, 'repos')),
    admin:
      adminWanted === undefined
        ? undefined
        : {
            username: e.TRIAD_ADMIN_USERNAME ?? 'admin',
            email: e.TRIAD_ADMIN_EMAIL ?? `${e.TRIAD_ADMIN_USERNAME ?? 'admin'}@localhost`,
            token: e.TRIAD_ADMIN_TOKEN,
          },
    operatorToken: e.TRIAD_OPERATOR_TOKEN,
    agentToken: e.TRIAD_AGENT_TOKEN,
    embeddedAgent: e.TRIAD_EMBEDDED_AGENT ?? (e.DATABASE_URL === undefined ? 'local' : 'off'),
    agentTimeoutMs: e.TRIAD_AGENT_TIMEOUT * 1000,
    stepTimeoutSeconds: e.TRIAD_STEP_TIMEOUT,
    stepLogMaxBytes: e.TRIAD_STEP_LOG_MAX_BYTES,
    pipelineLimits: {
      timeoutSeconds: e.TRIAD_PIPELINE_TIMEOUT,
      maxSteps: e.TRIAD_PIPELINE_MAX_STEPS,
      diskMaxBytes: e.TRIAD_STEP_DISK_MAX,
      fileMaxBytes: e.TRIAD_PIPELINE_FILE_MAX_BYTES,
    },
    agentWorkDir: e.TRIAD_AGENT_WORK_DIR === undefined ? undefined : path.resolve(e.TRIAD_AGENT_WORK_DIR),
    // steps never see the data directory (nor the raw cache, which holds private repositories'
    // files), even when it lies under a mounted system directory
    sandbox: sandboxOptions(e, [
      dataDir,
      path.resolve(e.TRIAD_REPO_DIR ?? path.join(dataDir, 'repos')),
      path.resolve(e.TRIAD_RAW_CACHE_DIR ?? path.join(dataDir, 'raw-cache')),
    ]),
    bodyLimit: e.TRIAD_BODY_LIMIT,
    shutdownTimeoutMs: e.TRIAD_SHUTDOWN_TIMEOUT_SECONDS * 1000,
    connections: {
      max: e.TRIAD_MAX_CONNECTIONS,
      perClient: e.TRIAD_MAX_CONNECTIONS_PER_CLIENT,
      firstRequestMs: e.TRIAD_FIRST_REQUEST_TIMEOUT_SECONDS * 1000,
    },
    idleGcMs: e.TRIAD_IDLE_GC_SECONDS * 1000,
    backendNice: e.TRIAD_BACKEND_NICE,
    otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
    serviceName: e.OTEL_SERVICE_NAME,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    logRequests: e.TRIAD_LOG_REQUESTS,
    issueMaxAssignees: e.TRIAD_ISSUE_MAX_ASSIGNEES,
    maxPinnedIssues: e.TRIAD_MAX_PINNED_ISSUES,
    pullCheckBudgetMs: e.TRIAD_PULL_CHECK_BUDGET_MS,
    limits: {
      blobMaxBytes: e.TRIAD_BLOB_MAX_BYTES,
      diffMaxFileBytes: e.TRIAD_DIFF_MAX_FILE_BYTES,
      diffMaxBytes: e.TRIAD_DIFF_MAX_BYTES,
    },
    rawSocketHandOff: e.TRIAD_RAW_SOCKET_HANDOFF,
    rawCache: {
      dir: path.resolve(e.TRIAD_RAW_CACHE_DIR ?? path.join(dataDir, 'raw-cache')),
      maxBytes: e.TRIAD_RAW_CACHE_BYTES,
    },
    maxTokensPerUser: e.TRIAD_MAX_TOKENS_PER_USER,
    maxOrgsPerUser: e.TRIAD_MAX_ORGS_PER_USER,
    authFailures: {
      limit: e.TRIAD_AUTH_FAILURE_LIMIT,
      windowMs: e.TRIAD_AUTH_FAILURE_WINDOW_SECONDS * 1000,
    },
    trustProxy: e.TRIAD_TRUST_PROXY,
    corsOrigins: e.TRIAD_CORS_ORIGINS,
    apiVariant: e.TRIAD_API_VARIANT,
    storage: storageSettings(e),
    webhooks: webhookSettings(e),
    housekeeping: housekeepingSettings(e),
    transport: {
      timeoutMs: e.TRIAD_TRANSPORT_TIMEOUT_SECONDS * 1000,
      maxBodyBytes: e.TRIAD_TRANSPORT_MAX_BODY_BYTES,
      spoolDir: path.resolve(e.TRIAD_TRANSPORT_SPOOL_DIR ?? os.tmpdir()),
      concurrency: e.TRIAD_TRANSPORT_CONCURRENCY,
      queue: e.TRIAD_TRANSPORT_QUEUE,
      retryAfterSeconds: e.TRIAD_TRANSPORT_RETRY_AFTER_SECONDS,
      hgWorkers: e.TRIAD_HG_WORKERS,
      hgStreamClones: e.TRIAD_HG_STREAM_CLONES,
    },
    blobs: { dir: path.join(dataDir, 'blobs'), s3, redirectDownloads: e.TRIAD_S3_REDIRECT_DOWNLOADS },
    assetMaxBytes: e.TRIAD_ASSET_MAX_BYTES,
    sessions: { idleMs: e.TRIAD_SESSION_IDLE, maxMs: e.TRIAD_SESSION_MAX },
  };
}

/** The S3 store's settings when `TRIAD_S3_ENDPOINT` is set (then both keys are required). */
function s3Settings(e: z.infer<typeof envSchema>): S3Settings | undefined {
  if (e.TRIAD_S3_ENDPOINT === undefined) return undefined;
  if (e.TRIAD_S3_ACCESS_KEY === undefined || e.TRIAD_S3_SECRET_KEY === undefined) {
    throw new Error(
      'invalid configuration: TRIAD_S3_ACCESS_KEY and TRIAD_S3_SECRET_KEY are required with TRIAD_S3_ENDPOINT',
    );
  }
  const m = /^(?:(https?):\/\/)?([^/:]+)(?::(\d+))?\/?$/.exec(e.TRIAD_S3_ENDPOINT);
  const [, scheme, host = '', port] = m ?? [];
  return {
    host,
    port: port === undefined ? undefined : Number(port),
    useSSL: e.TRIAD_S3_USE_SSL ?? scheme === 'https',
    accessKey: e.TRIAD_S3_ACCESS_KEY,
    secretKey: e.TRIAD_S3_SECRET_KEY,
    bucket: e.TRIAD_S3_BUCKET,
    region: e.TRIAD_S3_REGION,
  };
}
