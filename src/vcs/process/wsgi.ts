/**
 * Long-lived WSGI workers for a transport (Mercurial's hgweb, hgwsgi.py): one Python process
 * serves request after request, so a clone or push costs no interpreter start. The protocol is
 * described in hgwsgi.py: a request is a length-prefixed JSON object on stdin (the CGI variables,
 * the spooled body's path, kind-specific fields), the answer frames on stdout (`H` status and
 * headers, `B` body bytes, `E` end or error).
 *
 * Each worker runs in its own process group behind the same lifeline as the CGI backends
 * (cgi.ts): a request whose client leaves or whose time runs out kills the worker's whole group
 * (hooks included) before the request settles, so a push lock is released only once nothing of
 * the push runs any more; the pool starts a fresh worker for the next request. A worker that
 * dies fails its request (502) and is replaced the same way.
 */
import { createWriteStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { cgiEnv, LIFELINE, type CgiEnvInput, type CgiResult } from './cgi.ts';
import { Gate } from './gate.ts';
import type { PoolGroup, Pooled, ProcessPool } from './pool.ts';
import { niced } from './priority.ts';
import { spawnChild, type Child } from './spawner.ts';

/** A WSGI worker program (`name` keys its pool). */
export type WsgiApp = { name: string; command: string; args: string[]; env: NodeJS.ProcessEnv };

export type WsgiRequest = CgiEnvInput & {
  res: ServerResponse;
  /** Write the body to this file instead of the client (see `CgiRequest.output`). */
  output?: string;
  signal: AbortSignal;
  /** Fields of the request object besides `env` and `input` (the worker's own: repository, push). */
  fields: Record<string, unknown>;
};

/** How long a worker whose client left may take to end its answer before it is killed. */
const ABORT_GRACE_MS = 1000;

/** How long a worker may take to exit after its stdin closed before it is killed. */
const CLOSE_GRACE_MS = 5000;

class Worker implements Pooled {
  private readonly child: Child;
  private readonly stdin: Socket;
  private readonly stdout: Socket;
  private buf: Buffer = Buffer.alloc(0);
  private stderr = '';
  private onFrame: ((type: string, data: Buffer) => void) | undefined;
  private onDeath: (() => void) | undefined;
  /** Its key in the pool. */
  readonly id: string;
  dead = false;
  private closed = false;
  readonly exited: Promise<void>;

  static async start(app: WsgiApp, nice: number, id: string): Promise<Worker> {
    const [command, args] = niced(nice, app.command, app.args);
    // fd 3: the lifeline, held by the spawner
    const child = await spawnChild('/bin/sh', ['-c', LIFELINE, 'triad-wsgi', command, ...args], {
      env: app.env,
      stdio: ['pipe', 'pipe', 'pipe', 'hold'],
    });
    return new Worker(child, id);
  }

  private constructor(child: Child, id: string) {
    this.child = child;
    this.id = id;
    const [stdin, stdout, stderr] = child.stdio as [Socket, Socket, Socket];
    this.stdin = stdin;
    this.stdout = stdout;
    stdout.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.parse();
    });
    stderr.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString('utf8')).slice(-8192);
    });
    this.exited = child.exited.then(() => {
      this.dead = true;
      child.write(3, 'done\n', true); // the watcher ends whatever is left in the group
      this.onDeath?.();
    });
  }

  get pid(): number {
    return this.child.pid;
  }

  /** Serving a request. */
  busy(): boolean {
    return this.onFrame !== undefined;
  }

  /** Can serve a request: alive, not closed. */
  usable(): boolean {
    return !this.dead && !this.closed;
  }

  private parse(): void {
    while (this.buf.length >= 5) {
      const len = this.buf.readUInt32BE(1);
      if (this.buf.length < 5 + len) return;
      const type = String.fromCharCode(this.buf[0] ?? 0);
      const data = this.buf.subarray(5, 5 + len);
      this.buf = this.buf.subarray(5 + len);
      if (this.onFrame === undefined) {
        this.kill(); // a frame outside a request: the worker is confused
        return;
      }
      this.onFrame(type, data);
    }
  }

  /** Kills the worker's process group (the worker, its hooks, the lifeline watcher). */
  kill(): void {
    this.child.kill('SIGKILL');
  }

  /** Ends stdin: the worker exits once it is idle; killed if it lingers. */
  close(): void {
    if (this.closed || this.dead) return;
    this.closed = true;
    this.stdin.end();
    const t = setTimeout(() => this.kill(), CLOSE_GRACE_MS);
    t.unref();
    void this.exited.then(() => clearTimeout(t));
  }

  /** Serves one request; resolves once it is answered, or the worker is dead. */
  serve(r: WsgiRequest): Promise<CgiResult> {
    const { res } = r;
    const sink: Writable = r.output === undefined ? res : createWriteStream(r.output, { mode: 0o600 });
    sink.on('error', () => undefined);
    this.stderr = '';
    return new Promise<CgiResult>((resolve) => {
      let headersDone = false;
      let aborted = false;
      let finished = false;
      const finish = (outcome: CgiResult['outcome'], text: string) => {
        if (finished) return;
        finished = true;
        clearTimeout(killTimer);
        this.onFrame = undefined;
        this.onDeath = undefined;
        r.signal.removeEventListener('abort', abort);
        this.stdout.resume();
        const result: CgiResult = { outcome, code: outcome === 'ok' ? 0 : null, stderr: text.trim() };
        if (sink === res) resolve(result);
        else sink.end(() => resolve(result));
      };
      // A client that leaves often does so as the answer ends (it read the whole body): the
      // worker gets a moment to finish (its output discarded) before it is killed.
      let killTimer: NodeJS.Timeout | undefined;
      const abort = () => {
        aborted = true;
        this.stdout.resume();
        killTimer = setTimeout(() => this.kill(), ABORT_GRACE_MS); // settles through onDeath
      };
      this.onDeath = () => finish(aborted ? 'aborted' : 'failed', `worker exited: ${this.stderr}`);
      this.onFrame = (type, data) => {
        if (type === 'H' && !headersDone) {
          const head = JSON.parse(data.toString('utf8')) as { status: string; headers: [string, string][] };
          for (const [name, value] of head.headers) res.appendHeader(name, value);
          res.statusCode = Number.parseInt(head.status, 10) || 200;
          headersDone = true;
        } else if (type === 'B' && headersDone) {
          if (aborted) return;
          if (!sink.write(data)) {
            this.stdout.pause();
            sink.once('drain', () => {
              if (!finished) this.stdout.resume();
            });
          }
        } else if (type === 'E') {
          const text = data.toString('utf8');
          const outcome = aborted ? 'aborted' : headersDone && text === '' ? 'ok' : 'failed';
          finish(outcome, text === '' ? this.stderr : text);
        } else {
          this.kill();
        }
      };
      if (r.signal.aborted) abort();
      else r.signal.addEventListener('abort', abort, { once: true });
      const body = Buffer.from(
        JSON.stringify({ ...r.fields, env: cgiEnv(r), input: r.input?.file ?? null }),
        'utf8',
      );
      const head = Buffer.alloc(4);
      head.writeUInt32BE(body.length);
      this.stdin.write(Buffer.concat([head, body]));
    });
  }
}

/**
 * At most `workers` processes of one WSGI program, each serving one request at a time; requests
 * beyond wait in FIFO order (their callers bound the wait). The workers are entries of the
 * server's process pool, which closes those idle for `idleMs`; a dead one is replaced by the next
 * request.
 */
export class WsgiPool {
  private readonly app: WsgiApp;
  private readonly gate: Gate;
  private readonly pool: ProcessPool;
  private readonly group: PoolGroup;
  private readonly nice: number;
  private readonly idle: Worker[] = [];
  private readonly live = new Set<Worker>();
  private started = 0;
  private closed = false;

  /** `nice`: niceness added to the workers' (priority.ts), 0 by default. */
  constructor(app: WsgiApp, opts: { workers: number; pool: ProcessPool; idleMs?: number; nice?: number }) {
    this.app = app;
    this.gate = new Gate(opts.workers);
    this.pool = opts.pool;
    this.group = { name: `wsgi-${app.name}`, idleMs: opts.idleMs ?? 300_000 };
    this.nice = opts.nice ?? 0;
  }

  async serve(r: WsgiRequest): Promise<CgiResult> {
    const leave = await this.gate.enter(r.signal);
    try {
      const worker = await this.take();
      const result = await worker.serve(r);
      if (this.closed) worker.close();
      else if (worker.usable()) {
        this.pool.get(this.group, worker.id, () => worker); // used now: its idle time starts
        this.idle.push(worker);
      }
      return result;
    } finally {
      leave();
    }
  }

  /** Process ids of the live workers (tests). */
  pids(): number[] {
    return [...this.live].flatMap((w) => (w.dead ? [] : [w.pid]));
  }

  close(): void {
    this.closed = true;
    this.idle.splice(0);
    for (const w of this.live) {
      this.pool.drop(this.group, w.id, w);
      w.close();
    }
  }

  private async take(): Promise<Worker> {
    for (let w = this.idle.pop(); w !== undefined; w = this.idle.pop()) if (w.usable()) return w;
    this.started += 1;
    const w = await Worker.start(this.app, this.nice, String(this.started));
    this.live.add(w);
    this.pool.get(this.group, w.id, () => w);
    void w.exited.then(() => {
      this.live.delete(w);
      this.pool.drop(this.group, w.id, w);
    });
    return w;
  }
}
