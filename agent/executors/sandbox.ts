import { execFile, type ChildProcess } from 'node:child_process';
import { constants as fsc } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Readable, Writable } from 'node:stream';
import { z } from 'zod';
import type { ProcessSpec } from './process.ts';
import { attachOutbound, sandboxPid, STEP_DNS, type CiNetwork, type NetworkTools } from './step-network.ts';

/** The program's own files (sources, dependencies): never visible to steps. */
const APP_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The isolation of the `local` executor: every step runs under bubblewrap (`bwrap`) as an
 * unprivileged user, with its own user (no nested ones), PID, IPC, UTS, mount and network
 * namespaces, exactly its own environment, only its workspace writable, system directories
 * read-only, a private /tmp, and process, memory and file-size limits. The data directory, the
 * server's files and every other path not listed here are simply not mounted. The network is
 * the step's own: outbound to the internet only, or none (step-network.ts). The clone of the
 * repository runs in the same sandbox, on the host's network (it must reach the server).
 */

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** `512m`, `4g`, `65536`: bytes (k, m, g, t are powers of 1024). */
export function parseSize(text: string): number | undefined {
  const m = /^(\d{1,15})\s*([kmgt])?i?b?$/i.exec(text.trim());
  if (m === null) return undefined;
  const power = m[2] === undefined ? 0 : 'kmgt'.indexOf(m[2].toLowerCase()) + 1;
  const n = Number(m[1]) * 1024 ** power;
  return Number.isSafeInteger(n) ? n : undefined;
}

export const size = (min: number) =>
  z.string().transform((v, ctx) => {
    const n = parseSize(v);
    if (n === undefined || n < min) {
      ctx.addIssue({ code: 'custom', message: `must be a size of at least ${min} bytes, e.g. 512m or 4g` });
      return z.NEVER;
    }
    return n;
  });

/** The sandbox variables; read by `triad agent` and by the server for its embedded agent. */
export const sandboxEnvShape = {
  TRIAD_AGENT_SANDBOX_USER: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'must be a user name')
    .default('triad-ci'),
  TRIAD_AGENT_SANDBOX_NPROC: z.coerce.number().int().min(8).max(1_000_000).default(512),
  TRIAD_AGENT_SANDBOX_MEMORY: size(64 * 1024 * 1024).default(4 * 1024 ** 3),
  TRIAD_AGENT_SANDBOX_FILE_SIZE: size(1024 * 1024).default(2 * 1024 ** 3),
  TRIAD_AGENT_LOCAL_UNSANDBOXED: bool.default(false),
  /** What steps may connect to (the clone always uses the host's network to reach the server). */
  TRIAD_CI_NETWORK: z.enum(['outbound', 'none']).default('outbound'),
};
const sandboxEnv = z.object(sandboxEnvShape);

export type SandboxOptions = {
  /** The user steps run as when the agent runs as root (created once with useradd). */
  user: string;
  /** RLIMIT_NPROC: processes and threads of the step. */
  nproc: number;
  /** RLIMIT_AS: address space of each process, in bytes. */
  memoryBytes: number;
  /** RLIMIT_FSIZE: largest file a step may write, in bytes; also the size of its private /tmp. */
  fileSizeBytes: number;
  /** Extra paths never visible to steps even when they lie under a mounted system directory. */
  hide: string[];
  /** The steps' network (step-network.ts). */
  network: CiNetwork;
};

export function sandboxOptions(
  e: z.output<typeof sandboxEnv>,
  hide: string[] = [],
): SandboxOptions & { unsandboxed: boolean } {
  return {
    user: e.TRIAD_AGENT_SANDBOX_USER,
    nproc: e.TRIAD_AGENT_SANDBOX_NPROC,
    memoryBytes: e.TRIAD_AGENT_SANDBOX_MEMORY,
    fileSizeBytes: e.TRIAD_AGENT_SANDBOX_FILE_SIZE,
    unsandboxed: e.TRIAD_AGENT_LOCAL_UNSANDBOXED,
    network: e.TRIAD_CI_NETWORK,
    hide,
  };
}

export const DEFAULT_SANDBOX: SandboxOptions = {
  ...sandboxOptions(sandboxEnv.parse({})),
  hide: [],
};

/** Where the workspace is mounted inside the sandbox; steps start in `<WORKSPACE>/src`. */
export const WORKSPACE = '/workspace';
export const MIN_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

export type Identity = { uid: number; gid: number; name: string };

function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 127;
      resolve({ code, stdout, stderr: stderr || (err?.message ?? '') });
    });
  });
}

/** `name` on the PATH (else on the minimal one), and in `more` directories. */
async function findExecutable(name: string, more: string[] = []): Promise<string | undefined> {
  for (const dir of new Set([...(process.env.PATH ?? MIN_PATH).split(':'), ...more])) {
    if (dir === '') continue;
    const file = path.join(dir, name);
    try {
      await fs.access(file, fsc.X_OK);
      return file;
    } catch {
      /* next */
    }
  }
  return undefined;
}

async function lookupUser(name: string): Promise<Identity | undefined> {
  const r = await run('getent', ['passwd', name]);
  if (r.code !== 0) return undefined;
  const f = r.stdout.trim().split(':');
  const uid = Number(f[2]);
  const gid = Number(f[3]);
  return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid, name } : undefined;
}

/** The system user steps run as when the agent is root: looked up, or created once. */
async function ensureUser(name: string): Promise<Identity> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const found = await lookupUser(name);
    if (found !== undefined) {
      if (found.uid === 0) throw new Error(`the sandbox user ${name} is uid 0; steps never run as root`);
      return found;
    }
    const r = await run('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      '/nonexistent',
      '--shell',
      '/usr/sbin/nologin',
      '--comment',
      'Triad CI steps',
      name,
    ]);
    // 9: created meanwhile by another agent; 10: /etc/passwd is locked by another useradd
    if (r.code === 0 || r.code === 9) continue;
    if (r.code === 10) {
      await new Promise((res) => setTimeout(res, 100 + Math.random() * 200));
      continue;
    }
    throw new Error(
      `could not create the sandbox user ${name} with useradd (exit ${r.code}): ${r.stderr.trim()}`,
    );
  }
  throw new Error(`could not create the sandbox user ${name}: /etc/passwd stayed locked`);
}

async function kind(p: string): Promise<'dir' | 'file' | 'link' | undefined> {
  const st = await fs.lstat(p).catch(() => undefined);
  if (st === undefined) return undefined;
  return st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : 'file';
}

const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'];
/** Files of /etc that hold secrets: replaced by an empty file inside the sandbox. */
const ETC_SECRETS = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-', '/etc/security/opasswd'];
const ETC_SECRET_DIRS = ['/etc/ssl/private'];
/** The size of a step's /dev/shm (memory, like its /tmp). */
const SHM_BYTES = 64 * 1024 * 1024;

const under = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);

type Prepared = { id: Identity; bwrap: string; prlimit: string; fixed: string[]; net?: NetworkTools };

/** Where a sandboxed command may connect: the step's setting, or the host's network (the clone only). */
export type SandboxNetwork = CiNetwork | 'host';

/**
 * Runs commands under bubblewrap. `identity()` resolves the user and checks that bwrap, prlimit
 * and (for outbound steps) slirp4netns exist; `spec()` gives what to run with `runProcess`.
 */
export class Sandbox {
  readonly o: SandboxOptions;
  private prepared: Promise<Prepared> | undefined;

  constructor(opts: Partial<SandboxOptions> = {}) {
    this.o = { ...DEFAULT_SANDBOX, ...opts };
    this.o.hide = [...this.o.hide, APP_ROOT];
  }

  /** The user the steps run as (and the owner their workspaces must have). */
  async identity(): Promise<Identity> {
    return (await this.setup()).id;
  }

  /** Whether steps run as another user than the agent's (it runs as root). */
  get changesUser(): boolean {
    return process.getuid?.() === 0;
  }

  private setup() {
    this.prepared ??= (async () => {
      // started as the sandbox user: by its real path, which that user can reach
      const foundBwrap = await findExecutable('bwrap');
      const bwrap =
        foundBwrap === undefined ? undefined : await fs.realpath(foundBwrap).catch(() => foundBwrap);
      if (bwrap === undefined) {
        throw new Error(
          'bubblewrap (bwrap) is not installed; on Debian or Ubuntu: apt-get install bubblewrap',
        );
      }
      // the sandbox runs it by the path it has under /usr
      const found = await findExecutable('prlimit');
      const prlimit = found === undefined ? undefined : await fs.realpath(found).catch(() => found);
      if (prlimit === undefined || !prlimit.startsWith('/usr/')) {
        throw new Error('prlimit (util-linux) was not found under /usr');
      }
      const net = this.o.network === 'outbound' ? await networkTools(this.changesUser) : undefined;
      const id = this.changesUser
        ? await ensureUser(this.o.user)
        : { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, name: os.userInfo().username };
      return { id, bwrap, prlimit, fixed: await this.fixedArgs(), ...(net === undefined ? {} : { net }) };
    })();
    // a failed setup is tried again next time (a package may have been installed meanwhile)
    this.prepared.catch(() => (this.prepared = undefined));
    return this.prepared;
  }

  /** The mounts and namespaces every sandboxed command gets. */
  private async fixedArgs(): Promise<string[]> {
    const a = [
      '--unshare-user',
      // no user namespace inside: `unshare -Ur` (uid 0 in a namespace of its own) is refused
      '--disable-userns',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--hostname',
      'triad-ci',
      '--die-with-parent',
      '--new-session',
    ];
    for (const d of SYSTEM_DIRS) {
      const k = await kind(d);
      if (k === 'dir') a.push('--ro-bind', d, d);
      else if (k === 'link') a.push('--symlink', await fs.readlink(d), d);
    }
    for (const f of ETC_SECRETS) if ((await kind(f)) === 'file') a.push('--ro-bind', '/dev/null', f);
    // covers are tiny and read-only: a step cannot fill memory through them
    const cover = (d: string) => a.push('--size', '4096', '--tmpfs', d, '--remount-ro', d);
    for (const d of ETC_SECRET_DIRS) if ((await kind(d)) === 'dir') cover(d);
    for (const key of await fs.readdir('/etc/ssh').catch(() => [] as string[])) {
      if (/^ssh_host_.*_key$/.test(key)) a.push('--ro-bind', '/dev/null', `/etc/ssh/${key}`);
    }
    // the server's own files and data must not show through a mounted system directory
    for (const h of this.o.hide.map((p) => path.resolve(p))) {
      if (SYSTEM_DIRS.some((d) => under(h, d)) && (await kind(h)) === 'dir') cover(h);
    }
    // /dev holds only device nodes (read-only), with a small shared-memory directory
    a.push('--proc', '/proc', '--dev', '/dev', '--size', String(SHM_BYTES), '--tmpfs', '/dev/shm');
    a.push('--remount-ro', '/dev', '--size', String(this.o.fileSizeBytes), '--tmpfs', '/tmp');
    a.push('--symlink', '/tmp', '/var/tmp');
    return a;
  }

  /**
   * How to run `script` with `sh -c` in the sandbox: `workspace` mounted writable at /workspace,
   * the commands starting in /workspace/src (or /workspace with `inWorkspace`), exactly `env` (on
   * top of a minimal PATH, HOME, LANG, USER, TMPDIR) and the network `network`. bwrap itself
   * runs as the sandbox user, with an empty environment: nothing of the step reaches a process
   * outside the sandbox (its variables enter through `--setenv`, applied inside).
   */
  async spec(
    workspace: string,
    script: string,
    env: Record<string, string>,
    network: SandboxNetwork,
    opts: { cwd?: string; memoryBytes?: number | undefined } = {},
  ): Promise<ProcessSpec> {
    const s = await this.setup();
    const args = [...s.fixed];
    if (network !== 'host') args.push('--unshare-net');
    args.push(...(await resolverArgs(network === 'outbound' ? 5 : undefined)));
    args.push('--bind', workspace, WORKSPACE, '--remount-ro', '/');
    args.push('--chdir', opts.cwd ?? `${WORKSPACE}/src`, '--clearenv');
    const vars: Record<string, string> = {
      PATH: MIN_PATH,
      HOME: `${WORKSPACE}/home`,
      LANG: 'C.UTF-8',
      USER: s.id.name,
      LOGNAME: s.id.name,
      TMPDIR: '/tmp',
      ...env,
    };
    for (const [k, v] of Object.entries(vars)) args.push('--setenv', k, v);
    if (network === 'outbound') args.push('--info-fd', '3', '--block-fd', '4');
    args.push(
      '--',
      s.prlimit,
      `--nproc=${this.o.nproc}`,
      // a step's own `resources.memory` replaces the default (the agent's maximum bounds it)
      `--as=${opts.memoryBytes ?? this.o.memoryBytes}`,
      `--fsize=${this.o.fileSizeBytes}`,
      '--core=0',
      '--',
      '/bin/sh',
      '-c',
      script,
    );
    const net = s.net;
    if (network === 'outbound' && net === undefined) throw new Error('outbound step network not set up');
    return {
      file: s.bwrap,
      args,
      cwd: '/',
      env: {},
      sandboxed: true,
      ...(this.changesUser ? { uid: s.id.uid, gid: s.id.gid } : {}),
      ...(network === 'outbound' && net !== undefined
        ? { extraFds: 3, started: (child: ChildProcess) => connectOutbound(child, net) }
        : {}),
    };
  }
}

/**
 * Name resolution inside the sandbox. On the host's network the host's own files (following a
 * /etc/resolv.conf that points into /run); on the outbound network slirp4netns' DNS forwarder,
 * written through `dataFd`; without a network nothing more.
 */
async function resolverArgs(dataFd: number | undefined): Promise<string[]> {
  const a: string[] = [];
  for (const f of ['/etc/resolv.conf', '/etc/hosts']) {
    const k = await kind(f);
    let target = f;
    if (k === 'link') {
      const real = await fs.realpath(f).catch(() => undefined);
      if (real === undefined) continue;
      target = real;
      if (dataFd === undefined || f !== '/etc/resolv.conf') {
        if (!SYSTEM_DIRS.some((d) => under(real, d))) a.push('--ro-bind', real, real);
        continue;
      }
    }
    if (f === '/etc/resolv.conf' && dataFd !== undefined) a.push('--ro-bind-data', String(dataFd), target);
  }
  return a;
}

/** fd 3: bwrap's info (the sandbox's pid); fd 4: releases the sandbox; fd 5: its resolv.conf. */
async function connectOutbound(child: ChildProcess, tools: NetworkTools): Promise<() => void> {
  const stdio = child.stdio as unknown as [unknown, unknown, unknown, Readable, Writable, Writable];
  const [info, block, data] = [stdio[3], stdio[4], stdio[5]];
  for (const s of [block, data]) s.on('error', () => undefined);
  data.end(`nameserver ${STEP_DNS}\noptions edns0\n`);
  const pid = await sandboxPid(info);
  const stop = await attachOutbound(pid, tools);
  block.end('1');
  return stop;
}

/** slirp4netns, nsenter and ip, for outbound steps (which need the agent to run as root). */
async function networkTools(root: boolean): Promise<NetworkTools> {
  const hint = 'or set TRIAD_CI_NETWORK=none (steps then have no network)';
  if (!root) {
    throw new Error(
      `TRIAD_CI_NETWORK=outbound needs the agent to run as root (it sets each step's routes from outside the sandbox); run it as root, ${hint}`,
    );
  }
  const sbin = ['/usr/sbin', '/sbin'];
  const slirp4netns = await findExecutable('slirp4netns');
  if (slirp4netns === undefined) {
    throw new Error(
      `slirp4netns is not installed (steps reach the internet through it); on Debian or Ubuntu: apt-get install slirp4netns, ${hint}`,
    );
  }
  const nsenter = await findExecutable('nsenter', sbin);
  const ip = await findExecutable('ip', sbin);
  if (nsenter === undefined || ip === undefined) {
    throw new Error(`nsenter (util-linux) and ip (iproute2) are needed for outbound steps, ${hint}`);
  }
  return { slirp4netns, nsenter, ip };
}
