/**
 * Secrets given through the environment leave `process.env` as soon as this module is loaded
 * (config.ts imports it first, before any module that copies the environment for its child
 * processes), so no git, hg, fossil or CI step process inherits them. The configuration reads
 * them from here, once.
 */
const SECRET_VARS = [
  'TRIAD_ADMIN_TOKEN',
  'TRIAD_AGENT_TOKEN',
  'TRIAD_OPERATOR_TOKEN',
  'DATABASE_URL',
  'TRIAD_S3_SECRET_KEY',
  'TRIAD_S3_ACCESS_KEY',
] as const;

const taken = new Map<string, string>();

/** Moves the secret variables out of process.env (again, for any set since). */
export function takeSecretsFromEnv(): void {
  for (const k of SECRET_VARS) {
    const v = process.env[k];
    if (v === undefined) continue;
    taken.set(k, v);
    delete process.env[k];
  }
}

/** `env` with the secrets taken from process.env put back, when `env` is process.env. */
export function withSecrets(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (env !== process.env) return env;
  takeSecretsFromEnv();
  return { ...Object.fromEntries(taken), ...env };
}

takeSecretsFromEnv();
