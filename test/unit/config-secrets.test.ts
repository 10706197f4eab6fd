import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { NODE, ROOT } from '../helpers/process.ts';

/** Runs a module script in a fresh Node process with `env` and answers what it prints. */
function script(code: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      NODE,
      ['--input-type=module', '-e', code],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
    );
  });
}

describe('secrets given through the environment', () => {
  test('when the server configuration is loaded, then the secrets are read and no child process inherits them', async () => {
    const secrets = {
      TRIAD_ADMIN_TOKEN: 'adm-secret-1',
      TRIAD_AGENT_TOKEN: 'agent-secret-2',
      DATABASE_URL: 'postgres://u:db-secret-3@db/triad',
      TRIAD_S3_SECRET_KEY: 's3-secret-4',
      TRIAD_S3_ACCESS_KEY: 's3-access-5',
    };
    const out = await script(
      `
      const { loadConfig } = await import(${JSON.stringify(path.join(ROOT, 'src/config.ts'))});
      const { execFileSync } = await import('node:child_process');
      const c = loadConfig();
      const again = loadConfig();
      const child = execFileSync('sh', ['-c', 'env']).toString();
      console.log(JSON.stringify({
        admin: c.admin?.token, agent: c.agentToken, db: again.databaseUrl,
        inEnv: Object.keys(process.env).filter((k) => ${JSON.stringify(Object.keys(secrets))}.includes(k)),
        childSees: ${JSON.stringify(Object.values(secrets))}.filter((v) => child.includes(v)),
      }));
      `,
      secrets,
    );
    expect(JSON.parse(out)).toEqual({
      admin: 'adm-secret-1',
      agent: 'agent-secret-2',
      db: 'postgres://u:db-secret-3@db/triad',
      inEnv: [],
      childSees: [],
    });
  });
});
