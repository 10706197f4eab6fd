import type { Socket } from 'node:net';
import { spawnChild, type Child, type Slot } from './spawner.ts';

/**
 * Long-lived child processes spoken to over stdin/stdout (the readers' `git cat-file`, `hg serve
 * --cmdserver`, `fossil sql`, and Mercurial's operations server).
 */

/** Parses a response from the front of `buf`: the value and bytes used, or undefined for "need more". */
export type Parser<T> = (buf: Buffer) => { value: T; used: number } | undefined;

type Pending = {
  parse: Parser<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
};

export class ProcessDied extends Error {}

/**
 * One long-lived child process spoken to over stdin/stdout, one request at a time (requests are
 * queued, so a repository's reads are serialised on it). Stderr is kept for the current request.
 */
export class PersistentProcess {
  private child: Child | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private stderr = '';
  private readonly queue: { write: Buffer | string; pending: Pending }[] = [];
  private current: Pending | undefined;
  private closing = false;
  private killed = false;
  dead = false;

  constructor(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv }) {
    const died = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      const err = new ProcessDied(`${cmd} ${why}${this.stderr === '' ? '' : `: ${this.stderr.trim()}`}`);
      this.current?.reject(err);
      this.current = undefined;
      for (const q of this.queue.splice(0)) q.pending.reject(err);
    };
    // Started by the spawner: requests queue until it runs.
    const stdio: Slot[] = ['pipe', 'pipe', 'pipe'];
    spawnChild(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, detached: false, stdio }).then(
      (child) => {
        this.child = child;
        const [, stdout, stderr] = child.stdio as [Socket, Socket, Socket];
        stdout.on('data', (d: Buffer) => {
          this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
          this.drain();
        });
        stderr.on('data', (d: Buffer) => {
          if (this.stderr.length < 64 * 1024) this.stderr += d.toString('utf8');
        });
        void child.exited.then(({ code, signal }) => died(`exited (${signal ?? code ?? '?'})`));
        if (this.killed) child.kill('SIGKILL');
        else if (this.closing && !this.busy()) this.endInput();
        else if (this.current === undefined) this.next();
      },
      (e: unknown) => died(`failed: ${(e as Error).message}`),
    );
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  busy(): boolean {
    return this.current !== undefined || this.queue.length > 0;
  }

  /** Stderr written since the current request started. */
  takeStderr(): string {
    const s = this.stderr;
    this.stderr = '';
    return s;
  }

  request<T>(write: Buffer | string, parse: Parser<T>): Promise<T> {
    if (this.dead || this.closing) return Promise.reject(new ProcessDied('process is closed'));
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { parse, resolve: resolve as (v: unknown) => void, reject };
      this.queue.push({ write, pending });
      if (this.current === undefined) this.next();
    });
  }

  private next(): void {
    const stdin = this.child?.stdin;
    if (stdin === null || stdin === undefined) return; // not started yet: it calls again
    const item = this.queue.shift();
    if (item === undefined) {
      if (this.closing) this.endInput();
      return;
    }
    this.current = item.pending;
    this.stderr = '';
    stdin.write(item.write);
    this.drain();
  }

  private drain(): void {
    const cur = this.current;
    if (cur === undefined || this.buf.length === 0) return;
    let r: { value: unknown; used: number } | undefined;
    try {
      r = cur.parse(this.buf);
    } catch (e) {
      this.current = undefined;
      cur.reject(e instanceof Error ? e : new Error(String(e)));
      this.kill();
      return;
    }
    if (r === undefined) return;
    this.buf = this.buf.subarray(r.used);
    this.current = undefined;
    cur.resolve(r.value);
    this.next();
  }

  /** Ends stdin once queued requests are done (the process exits on EOF). */
  close(): void {
    this.closing = true;
    if (!this.busy()) this.endInput();
  }

  /** Ends stdin (the process exits on EOF); killed if it lingers. */
  private endInput(): void {
    const child = this.child;
    if (child === undefined) return; // not started yet: done once it is
    child.stdin?.end();
    const t = setTimeout(() => this.kill(), 5000);
    t.unref();
    void child.exited.then(() => clearTimeout(t));
  }

  kill(): void {
    this.killed = true;
    if (!this.dead) this.child?.kill('SIGKILL');
  }
}

/**
 * Holds one persistent process and replaces it when it dies: a request that fails because the
 * process crashed is retried once on a fresh process.
 */
export class Respawning {
  private proc: PersistentProcess | undefined;
  private readonly start: () => PersistentProcess;
  private closed = false;

  constructor(start: () => PersistentProcess) {
    this.start = start;
  }

  get(): PersistentProcess {
    if (this.closed) throw new ProcessDied('reader is closed');
    if (this.proc === undefined || this.proc.dead) this.proc = this.start();
    return this.proc;
  }

  async run<T>(fn: (p: PersistentProcess) => Promise<T>): Promise<T> {
    try {
      return await fn(this.get());
    } catch (e) {
      if (!(e instanceof ProcessDied) || this.closed) throw e;
      return fn(this.get());
    }
  }

  busy(): boolean {
    return this.proc?.busy() === true;
  }

  close(): void {
    this.closed = true;
    this.proc?.close();
  }
}
