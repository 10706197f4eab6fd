import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Running `node src/cli.ts ...` as a real process, the way a user does. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const NODE = path.join(ROOT, 'node_modules/.bin/node');
export const CLI = path.join(ROOT, 'src/cli.ts');

/** The environment of a child process: this one's, minus anything that would change its setup. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'DATABASE_URL' || k === 'NODE_OPTIONS' || k === 'PORT' || k.startsWith('TRIAD_')) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null };

export function exited(c: ChildProcess): Promise<Exit> {
  if (c.exitCode !== null || c.signalCode !== null) {
    return Promise.resolve({ code: c.exitCode, signal: c.signalCode });
  }
  return new Promise((resolve) => c.once('exit', (code, signal) => resolve({ code, signal })));
}

export type Proc = { child: ChildProcess; output: () => string; stderr: () => string };

/** Tracks what a test file starts, so `cleanup` leaves nothing behind. */
export class Processes {
  readonly children = new Set<ChildProcess>();
  readonly dirs: string[] = [];

  async tempDir(prefix = 'triad-start-'): Promise<string> {
    const d = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  /**
   * `triad serve` as a child (or `npm start`, the README's command). `detached` puts it in a process group of its own (as a shell puts
   * a foreground job), so a test can send the terminal's Ctrl-C to the whole group.
   */
  serve(env: Record<string, string>, opts: { detached?: boolean; npmStart?: boolean } = {}): Proc {
    const [file, args] = opts.npmStart === true ? ['npm', ['start', '--silent']] : [NODE, [CLI, 'serve']];
    const child = spawn(file, args, {
      cwd: ROOT,
      env: childEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: opts.detached ?? false,
    });
    this.children.add(child);
    let out = '';
    let err = '';
    child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr?.on('data', (b: Buffer) => {
      out += b.toString();
      err += b.toString();
    });
    return { child, output: () => out, stderr: () => err };
  }

  /** Runs the CLI to its end; `stdin`: what it reads on standard input (else nothing, closed). */
  runCli(
    args: string[],
    env: Record<string, string>,
    stdin?: string,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = execFile(
        NODE,
        [CLI, ...args],
        { cwd: ROOT, env: childEnv(env), timeout: 30_000 },
        (err, stdout, stderr) => {
          const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
          resolve({ code, stdout, stderr });
        },
      );
      child.stdin?.end(stdin ?? '');
      this.children.add(child);
    });
  }

  async cleanup(): Promise<void> {
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all([...this.children].map((c) => exited(c)));
    for (const d of this.dirs) {
      await stopPostgresOf(d);
      await fs.rm(d, { recursive: true, force: true });
    }
  }
}

/** Polls /readyz until 200; fails early when the process dies. Returns the milliseconds it took. */
export async function waitReady(p: Proc, url: string, limitMs = 90_000): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < limitMs) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) {
      throw new Error(
        `server exited (${p.child.exitCode ?? p.child.signalCode}) before ready:\n${p.output()}`,
      );
    }
    const r = await fetch(`${url}/readyz`).catch(() => undefined);
    if (r?.status === 200) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  throw new Error(`server not ready after ${limitMs} ms:\n${p.output()}`);
}

/**
 * The first match of `re` in what the process wrote to stderr, waiting for it (its pipe is read
 * asynchronously: a line written before the server was ready may still be on the way).
 */
export async function stderrMatch(p: Proc, re: RegExp, limitMs = 10_000): Promise<RegExpExecArray | null> {
  const started = Date.now();
  for (;;) {
    const m = re.exec(p.stderr());
    if (m !== null || Date.now() - started > limitMs) return m;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits for the exit at most `ms`; undefined when the process is still running then. */
export async function exitWithin(p: Proc, ms: number): Promise<Exit | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([
    exited(p.child),
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    }),
  ]);
  clearTimeout(timer);
  return result;
}

export async function stop(p: Proc): Promise<Exit> {
  const done = exited(p.child);
  p.child.kill('SIGTERM');
  const result = await exitWithin(p, 20_000);
  if (result === undefined) throw new Error(`server did not exit within 20 s of SIGTERM:\n${p.output()}`);
  return done;
}

/** Live (not zombie) processes of this machine with their command line's arguments. */
async function liveProcesses(): Promise<{ pid: number; args: string[] }[]> {
  const found: { pid: number; args: string[] }[] = [];
  for (const e of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const cmd = await fs.readFile(`/proc/${e}/cmdline`, 'utf8').catch(() => '');
    const stat = await fs.readFile(`/proc/${e}/stat`, 'utf8').catch(() => '');
    if (cmd === '' || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
    found.push({ pid: Number(e), args: cmd.split('\0') });
  }
  return found;
}

/** Process ids of live PostgreSQL processes whose command line names a path under `dir`. */
export async function postgresUnder(dir: string): Promise<number[]> {
  return (await liveProcesses())
    .filter((p) => p.args[0]?.endsWith('/postgres') && p.args.some((a) => a.includes(dir)))
    .map((p) => p.pid);
}

/** Process ids of live processes one of whose arguments contains `text`. */
export async function processesNaming(text: string): Promise<number[]> {
  return (await liveProcesses()).filter((p) => p.args.some((a) => a.includes(text))).map((p) => p.pid);
}

async function stopPostgresOf(dir: string): Promise<void> {
  for (const pid of await postgresUnder(dir)) {
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {
      // gone already
    }
  }
}
