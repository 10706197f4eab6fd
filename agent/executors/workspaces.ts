import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runProcess } from './process.ts';
import { WORKSPACE, type Sandbox } from './sandbox.ts';
import { processAlive as alive } from '../../src/db/processes.ts';

/** This agent process's mark in workspace names (a pid alone may be another namespace's). */
const NONCE = randomBytes(3).toString('hex');
const NAME = /^triad-(\d+)-(?:([0-9a-f]{6})-)?(?:p(\d+)|probe)-[A-Za-z0-9]{6}$/;

/** Removes a tree as the agent's user, even when a step left directories without write permission. */
async function removeTree(dir: string): Promise<void> {
  try {
    await fs.rm(dir, { recursive: true, force: true });
  } catch {
    await new Promise<void>((resolve) => {
      const c = spawn('chmod', ['-R', 'u+rwX', dir], { stdio: 'ignore' });
      c.on('close', () => resolve());
      c.on('error', () => resolve());
    });
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Can `id` reach (traverse into) `dir`: every directory from / down to it lets it search? */
async function reachable(dir: string, id: { uid: number; gid: number }): Promise<boolean> {
  for (let d = dir; ; d = path.dirname(d)) {
    const st = await fs.stat(d);
    const bits = st.uid === id.uid ? 0o100 : st.gid === id.gid ? 0o010 : 0o001;
    if ((st.mode & bits) === 0) return false;
    if (d === path.dirname(d)) return true;
  }
}

/** Refuses a workspace root someone other than root could plant names in (root removes in it). */
async function rootOnly(dir: string): Promise<void> {
  const st = await fs.lstat(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a root-owned directory that only root may write (workspaces go there)`);
  }
}

/**
 * The shared root for workspaces of an agent running as root, in /var/tmp (on disk, unlike a
 * /tmp that may be memory); its path is what a step sees of the host in /proc/self/mountinfo, so
 * it says nothing about the server's data directory.
 */
async function sharedRoot(): Promise<string> {
  const base = (await fs.stat('/var/tmp').catch(() => undefined))?.isDirectory() ? '/var/tmp' : os.tmpdir();
  const dir = path.join(base, 'triad-ci-work');
  await fs.mkdir(dir, { mode: 0o711 }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
  await rootOnly(dir);
  await fs.chmod(dir, 0o711);
  return dir;
}

/**
 * The workspaces of the `local` executor: made by the agent (two empty directories handed to the
 * step user), emptied by the step user in the sandbox (a tree written by a step is never walked
 * by root), and swept when the agent process that made them is gone.
 */
export class Workspaces {
  private readonly sandbox: Sandbox | undefined;
  private readonly configured: string | undefined;
  private ready: Promise<string> | undefined;

  constructor(sandbox: Sandbox | undefined, configured: string | undefined) {
    this.sandbox = sandbox;
    this.configured = configured === undefined ? undefined : path.resolve(configured);
  }

  private get asRoot(): Sandbox | undefined {
    return this.sandbox?.changesUser === true ? this.sandbox : undefined;
  }

  /**
   * Where workspaces go: the configured directory (for an agent running as root, one only root
   * may write), unless the step user cannot reach it (bwrap, running as that user, must find the
   * workspace); then the shared root-owned directory. Default: that directory as root, else the
   * temp directory.
   */
  root(): Promise<string> {
    this.ready ??= (async () => {
      const sandbox = this.asRoot;
      const configured = this.configured;
      if (configured === undefined) return sandbox !== undefined ? sharedRoot() : os.tmpdir();
      await fs.mkdir(configured, { recursive: true });
      if (sandbox === undefined) return configured;
      await rootOnly(configured);
      if (await reachable(configured, await sandbox.identity())) return configured;
      return sharedRoot();
    })();
    this.ready.catch(() => (this.ready = undefined));
    return this.ready;
  }

  /** A fresh, empty workspace with `home/`, both owned by the step user (the clone makes `src/`). */
  async create(prefix: string): Promise<string> {
    const dir = await fs.mkdtemp(path.join(await this.root(), `triad-${process.pid}-${NONCE}-${prefix}-`));
    await fs.mkdir(path.join(dir, 'home'));
    const sandbox = this.asRoot;
    if (sandbox !== undefined) {
      const id = await sandbox.identity();
      for (const d of [dir, path.join(dir, 'home')]) await fs.lchown(d, id.uid, id.gid);
    }
    return dir;
  }

  /**
   * Removes a workspace: its content by the step user in the sandbox (no network), then the empty
   * directory by the agent. Should that fail, the agent removes what is left itself.
   */
  async remove(dir: string): Promise<void> {
    const sandbox = this.asRoot;
    if (sandbox !== undefined) {
      const script = `chmod -R u+rwX ${WORKSPACE} 2>/dev/null; find ${WORKSPACE} -mindepth 1 -delete`;
      const spec = await sandbox.spec(dir, script, {}, 'none', { cwd: WORKSPACE }).catch(() => undefined);
      if (spec !== undefined)
        await runProcess(spec, AbortSignal.timeout(600_000), () => undefined).catch(() => 1);
      if (
        await fs.rmdir(dir).then(
          () => true,
          () => false,
        )
      )
        return;
    }
    await removeTree(dir);
  }

  /** Removes workspaces of agent processes that are gone, and this process's of `active`'s complement. */
  async sweep(active: ReadonlySet<number>): Promise<void> {
    const root = await this.root().catch(() => undefined);
    if (root === undefined) return;
    for (const name of await fs.readdir(root).catch(() => [] as string[])) {
      const m = NAME.exec(name);
      if (m === null) continue;
      const pid = Number(m[1]);
      const mine = pid === process.pid && m[2] === NONCE;
      if (mine && (m[3] === undefined || active.has(Number(m[3])))) continue;
      // a live process of another name is another agent (or the pid was reused): left alone
      if (!mine && alive(pid)) continue;
      await this.remove(path.join(root, name)).catch(() => undefined);
    }
  }
}
