import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';

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
  TRIAD_BASE_URL: optionalString.refine(
    (v) => v === undefined || /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(v),
    'must be an http(s) URL without query or fragment',
  ),
  TRIAD_DATA_DIR: z.string().default('./data'),
  DATABASE_URL: optionalString,
  TRIAD_REPO_DIR: optionalString,
  TRIAD_ADMIN_USERNAME: optionalString,
  TRIAD_ADMIN_EMAIL: optionalString,
  TRIAD_ADMIN_TOKEN: optionalString,
  TRIAD_AGENT_TOKEN: optionalString,
  TRIAD_EMBEDDED_AGENT: z.enum(['local', 'off']).optional(),
  TRIAD_AGENT_TIMEOUT: z.coerce.number().positive().default(60),
  TRIAD_BODY_LIMIT: z.string().default('1mb'),
  TRIAD_SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().positive().default(25),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString,
  OTEL_SERVICE_NAME: z.string().default('triad'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRIAD_LOG_REQUESTS: bool.default(true),
  TRIAD_ISSUE_MAX_ASSIGNEES: z.coerce.number().int().min(1).max(1000).default(10),
  TRIAD_TRANSPORT_TIMEOUT_SECONDS: z.coerce.number().positive().default(600),
  TRIAD_TRANSPORT_MAX_BODY_MB: z.coerce.number().positive().default(1024),
  TRIAD_TRANSPORT_SPOOL_DIR: optionalString,
});

export type Config = {
  port: number;
  host: string;
  /** Explicit public address; when unset it follows the port actually bound. */
  baseUrl: string | undefined;
  dataDir: string;
  databaseUrl: string | undefined;
  repoDir: string;
  admin: { username: string; email: string; token: string | undefined } | undefined;
  agentToken: string | undefined;
  embeddedAgent: 'local' | 'off';
  /** A running pipeline whose agent is silent this long becomes `error`. */
  agentTimeoutMs: number;
  bodyLimit: string;
  shutdownTimeoutMs: number;
  otlpEndpoint: string | undefined;
  serviceName: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  logRequests: boolean;
  /** Most assignees one issue may have (400 beyond, on create and on add). */
  issueMaxAssignees: number;
  /** Clone/push at clone URLs: run time limit, request body cap, where bodies are spooled. */
  transport: { timeoutMs: number; maxBodyBytes: number; spoolDir: string };
};

/** Parses the environment once; a bad value fails fast with every problem listed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable (`PORT=` in an env file or a chart) means "unset", for every variable:
  // otherwise `PORT=` would coerce to 0 (a random port) and `LOG_LEVEL=` would be rejected.
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.TRIAD_DATA_DIR);
  const adminWanted = e.TRIAD_ADMIN_USERNAME ?? e.TRIAD_ADMIN_TOKEN;
  return {
    port: e.PORT,
    host: e.HOST,
    baseUrl: e.TRIAD_BASE_URL?.replace(/\/+$/, ''),
    dataDir,
    databaseUrl: e.DATABASE_URL,
    repoDir: path.resolve(e.TRIAD_REPO_DIR ?? path.join(dataDir, 'repos')),
    admin:
      adminWanted === undefined
        ? undefined
        : {
            username: e.TRIAD_ADMIN_USERNAME ?? 'admin',
            email: e.TRIAD_ADMIN_EMAIL ?? `${e.TRIAD_ADMIN_USERNAME ?? 'admin'}@localhost`,
            token: e.TRIAD_ADMIN_TOKEN,
          },
    agentToken: e.TRIAD_AGENT_TOKEN,
    embeddedAgent: e.TRIAD_EMBEDDED_AGENT ?? (e.DATABASE_URL === undefined ? 'local' : 'off'),
    agentTimeoutMs: e.TRIAD_AGENT_TIMEOUT * 1000,
    bodyLimit: e.TRIAD_BODY_LIMIT,
    shutdownTimeoutMs: e.TRIAD_SHUTDOWN_TIMEOUT_SECONDS * 1000,
    otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
    serviceName: e.OTEL_SERVICE_NAME,
    logLevel: e.LOG_LEVEL,
    logRequests: e.TRIAD_LOG_REQUESTS,
    issueMaxAssignees: e.TRIAD_ISSUE_MAX_ASSIGNEES,
    transport: {
      timeoutMs: e.TRIAD_TRANSPORT_TIMEOUT_SECONDS * 1000,
      maxBodyBytes: Math.floor(e.TRIAD_TRANSPORT_MAX_BODY_MB * 1024 * 1024),
      spoolDir: path.resolve(e.TRIAD_TRANSPORT_SPOOL_DIR ?? os.tmpdir()),
    },
  };
}
