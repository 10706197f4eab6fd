import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { loadConfig } from './config.ts';
import { inContext } from './server.ts';
import { serve } from './main.ts';
import { createServices, type Services } from './services.ts';
import { migrate, openOrm, type Orm } from './db/database.ts';
import { embeddedDatabaseForCli } from './db/datadir.ts';
import { poolOptions, sessionUrl } from './db/settings.ts';
import { Metrics } from './telemetry/metrics.ts';
import { createLogger } from './telemetry/logger.ts';
import { createUserBody, createTokenBody } from './users/schemas.ts';
import { createAgentBody } from './agents/schemas.ts';
import { ALL_SCOPES } from './domain/access.ts';
import { parseWith } from './http/input.ts';
import { runAgent } from '../agent/main.ts';

const USAGE = `usage: triad <command>

commands:
  serve                                   start the server (default)
  agent                                   run a CI agent (configured by TRIAD_AGENT_* variables)
  operator                                run the AgentPool operator (TRIAD_OPERATOR_* variables)
  storage                                 run a storage node (TRIAD_STORAGE_* variables)
  storage restore [--repo ID] [--force]   rebuild this node's missing repositories from backups
  migrate                                 apply pending database migrations and exit
  admin user create --username U --email E [--admin] [--display-name N]
                    [--access-token] [--scopes a,b] [--token-name N]
                                          create a user; --access-token prints a new token
  admin user password --username U [--link]
                                          set U's web password to the first line of standard
                                          input (ends U's web sessions); --link prints a
                                          one-time link (24 h) to set it in a browser instead
  admin token create --username U [--scopes a,b] [--token-name N]
                                          print a new personal token of user U
  admin agent create --name N             register a CI agent and print its token
  admin storage list                      the storage nodes, their state and repositories
  admin storage drain|undrain --node N    stop (or resume) placing new repositories on N
  admin repo move ORG/REPO --to NODE      move a repository to another storage node

With the embedded database these commands use the running server's PostgreSQL when a server
owns TRIAD_DATA_DIR, and start their own otherwise.
`;

/**
 * Runs `fn` with the services on the configured database: DATABASE_URL, else the embedded one of
 * TRIAD_DATA_DIR (the running server's when one owns it). Migrations are applied first.
 */
async function withServices<T>(fn: (s: { orm: Orm; services: Services }) => Promise<T>): Promise<T> {
  const config = { ...loadConfig(), admin: undefined, embeddedAgent: 'off' as const };
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', { format: config.logFormat });
  const db =
    config.databaseUrl === undefined
      ? await embeddedDatabaseForCli(config.dataDir, process.argv.slice(2).join(' '), log)
      : { url: config.databaseUrl, close: () => Promise.resolve() };
  try {
    const orm = await openOrm(db.url, poolOptions(config.database, 2));
    const sessionDb = sessionUrl(db.url, config.databaseUrl, config.database);
    try {
      await migrate(sessionDb, orm);
      const baseUrl = config.baseUrl ?? `http://localhost:${config.port}`;
      const services = createServices({
        config,
        orm,
        log,
        metrics: new Metrics(),
        baseUrl: () => baseUrl,
        databaseUrl: sessionDb,
      });
      try {
        return await fn({ orm, services });
      } finally {
        services.vcs.closeProcesses();
        services.transports.close();
      }
    } finally {
      await orm.close();
    }
  } finally {
    await db.close();
  }
}

/** How long a password link printed by `admin user password --link` is valid. */
const LINK_MS = 24 * 3600_000;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The first line of `text`, without its line ending. */
function firstLine(text: string): string {
  return text.split(/\r?\n/, 1)[0] ?? '';
}

/** A message for any thrown value: never "undefined". */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const m = err.message.trim();
    if (m !== '') return m;
    const code = (err as NodeJS.ErrnoException).code;
    return `${err.name}${code === undefined ? '' : ` ${code}`} (no message)${err.stack === undefined ? '' : `\n${err.stack}`}`;
  }
  if (err === undefined || err === null) return 'failed without an error message';
  if (typeof err === 'string') return err === '' ? 'failed without an error message' : err;
  try {
    return JSON.stringify(err);
  } catch {
    return Object.prototype.toString.call(err);
  }
}

/**
 * The flags of `command` (`admin user create`): an unknown flag, a flag without its value or a
 * stray argument fails with the command's name; so does a missing one of `required`.
 */
function flags<O extends ParseArgsOptionsConfig>(
  command: string,
  args: string[],
  options: O,
  required: (keyof O & string)[] = [],
): ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'] {
  let values: Record<string, unknown>;
  try {
    values = parseArgs({ args, options }).values;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const flag = /'([^']+)'/.exec(err.message)?.[1] ?? '';
      throw new Error(`${command}: unknown flag ${flag}`, { cause: e });
    }
    if (err.code?.startsWith('ERR_PARSE_ARGS_') === true)
      throw new Error(`${command}: ${err.message}`, { cause: e });
    throw e;
  }
  const missing = required.filter((k) => values[k] === undefined || values[k] === '').map((k) => `--${k}`);
  if (missing.length > 0) {
    throw new Error(`${command}: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required`);
  }
  return values as ReturnType<typeof parseArgs<{ args: string[]; options: O }>>['values'];
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
  if (cmd === 'operator') {
    const { runOperator } = await import('./operator/main.ts');
    runOperator();
    return -1;
  }
  if (cmd === 'storage' || (cmd === 'admin' && (rest[0] === 'storage' || rest[0] === 'repo'))) {
    const { storageCommand } = await import('./storage-node/cli.ts');
    return storageCommand(cmd, rest, withServices);
  }
  if (cmd === 'admin' && rest[0] === 'agent' && rest[1] === 'create') {
    const values = flags('admin agent create', rest.slice(2), { name: { type: 'string' } }, ['name']);
    const { name } = parseWith(createAgentBody, { name: values.name }, 'arguments');
    await withServices((s) =>
      inContext(s.orm, async () => {
        const a = await s.services.agents.create(name);
        process.stdout.write(`created agent ${a.name} (id ${a.id})\n${a.token}\n`);
      }),
    );
    return 0;
  }
  if (cmd === 'admin' && rest[0] === 'token' && rest[1] === 'create') {
    const values = flags(
      'admin token create',
      rest.slice(2),
      {
        username: { type: 'string' },
        scopes: { type: 'string' },
        'token-name': { type: 'string', default: 'cli' },
      },
      ['username'],
    );
    const username = values.username ?? '';
    const tokenBody = parseWith(
      createTokenBody,
      { name: values['token-name'], scopes: values.scopes?.split(',').map((s) => s.trim()) ?? ALL_SCOPES },
      'arguments',
    );
    await withServices((s) =>
      inContext(s.orm, async () => {
        const user = await s.services.users.byUsername(username);
        const t = await s.services.users.createToken(user.id, tokenBody);
        process.stdout.write(`${t.token}\n`);
      }),
    );
    return 0;
  }
  if (cmd === 'admin' && rest[0] === 'user' && rest[1] === 'password') {
    const values = flags(
      'admin user password',
      rest.slice(2),
      { username: { type: 'string' }, link: { type: 'boolean', default: false } },
      ['username'],
    );
    const username = values.username ?? '';
    // the password is the first line of standard input (never an argument: `ps` would show it)
    const password = values.link ? undefined : firstLine(await readStdin());
    await withServices((s) =>
      inContext(s.orm, async () => {
        const user = await s.services.users.byUsername(username);
        if (password === undefined) {
          const token = await s.services.users.passwords.createLink(user.id, LINK_MS);
          const base = loadConfig().baseUrl ?? `http://localhost:${loadConfig().port}`;
          process.stdout.write(`${base}/-/password/set?token=${token}\n`);
          return;
        }
        await s.services.users.passwords.set(user.id, password);
        process.stdout.write(`password set for ${user.username}; its web sessions were ended\n`);
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
    const values = flags(
      'admin user create',
      rest.slice(2),
      {
        username: { type: 'string' },
        email: { type: 'string' },
        'display-name': { type: 'string' },
        admin: { type: 'boolean', default: false },
        'access-token': { type: 'boolean', default: false },
        scopes: { type: 'string' },
        'token-name': { type: 'string', default: 'cli' },
      },
      ['username', 'email'],
    );
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
  const help = cmd === 'help' || cmd === '--help' || cmd === '-h';
  const words = cmd === 'admin' ? ['admin', ...rest.slice(0, 2)].join(' ') : cmd;
  process.stderr.write(help ? USAGE : `triad: unknown command "${words}"\n\n${USAGE}`);
  return help ? 0 : 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`triad: ${errorMessage(err)}\n`);
    process.exit(1);
  },
);
