import { parseArgs } from 'node:util';
import { loadConfig } from './config.ts';
import { startServer, inContext } from './server.ts';
import { serve } from './main.ts';
import { createLogger } from './telemetry/logger.ts';
import { createUserBody, createTokenBody } from './users/service.ts';
import { createAgentBody } from './agents/service.ts';
import { ALL_SCOPES } from './http/auth.ts';
import { parseWith } from './http/api.ts';
import { runAgent } from '../agent/main.ts';

const USAGE = `usage: triad <command>

commands:
  serve                                   start the server (default)
  agent                                   run a CI agent (configured by TRIAD_AGENT_* variables)
  migrate                                 apply pending database migrations and exit
  admin user create --username U --email E [--admin] [--display-name N]
                    [--access-token] [--scopes a,b] [--token-name N]
                                          create a user; --access-token prints a new token
  admin agent create --name N             register a CI agent and print its token
`;

async function withServices<T>(
  fn: (s: Awaited<ReturnType<typeof startServer>>) => Promise<T>,
  migrateFirst = true,
): Promise<T> {
  const config = {
    ...loadConfig(),
    port: 0,
    host: '127.0.0.1',
    admin: undefined,
    embeddedAgent: 'off' as const,
  };
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn');
  const running = await startServer(config, { log, migrate: migrateFirst });
  try {
    return await fn(running);
  } finally {
    await running.close();
  }
}

export async function main(argv: string[]): Promise<number> {
  const [cmd = 'serve', ...rest] = argv;
  if (cmd === 'serve') {
    await serve();
    return -1;
  }
  if (cmd === 'agent') {
    await runAgent();
    return -1;
  }
  if (cmd === 'admin' && rest[0] === 'agent' && rest[1] === 'create') {
    const { values } = parseArgs({ args: rest.slice(2), options: { name: { type: 'string' } } });
    const { name } = parseWith(createAgentBody, { name: values.name }, 'arguments');
    await withServices((s) =>
      inContext(s.orm, async () => {
        const a = await s.services.agents.create(name);
        process.stdout.write(`created agent ${a.name} (id ${a.id})\n${a.token}\n`);
      }),
    );
    return 0;
  }
  if (cmd === 'migrate') {
    await withServices(() => {
      process.stdout.write('migrations are up to date\n');
      return Promise.resolve();
    });
    return 0;
  }
  if (cmd === 'admin' && rest[0] === 'user' && rest[1] === 'create') {
    const { values } = parseArgs({
      args: rest.slice(2),
      options: {
        username: { type: 'string' },
        email: { type: 'string' },
        'display-name': { type: 'string' },
        admin: { type: 'boolean', default: false },
        'access-token': { type: 'boolean', default: false },
        scopes: { type: 'string' },
        'token-name': { type: 'string', default: 'cli' },
      },
    });
    const body = parseWith(
      createUserBody,
      {
        username: values.username,
        email: values.email,
        display_name: values['display-name'],
        is_admin: values.admin,
      },
      'arguments',
    );
    const tokenBody = values['access-token']
      ? parseWith(
          createTokenBody,
          {
            name: values['token-name'],
            scopes: values.scopes?.split(',').map((s) => s.trim()) ?? ALL_SCOPES,
          },
          'arguments',
        )
      : undefined;
    await withServices((s) =>
      inContext(s.orm, async () => {
        const user = await s.services.users.create(body);
        process.stdout.write(
          `created user ${user.username} (id ${user.id}${user.isAdmin ? ', admin' : ''})\n`,
        );
        if (tokenBody !== undefined) {
          const t = await s.services.users.createToken(user.id, tokenBody);
          process.stdout.write(`${t.token}\n`);
        }
      }),
    );
    return 0;
  }
  process.stderr.write(USAGE);
  return cmd === 'help' || cmd === '--help' ? 0 : 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`triad: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
