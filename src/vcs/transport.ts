import type { IncomingMessage, ServerResponse } from 'node:http';
import { runCgi, type CgiRequest, type CgiResult } from './process/cgi.ts';
import type { VcsDriver } from './driver.ts';
import { Gate, GateFull, holdWhileRead } from './process/gate.ts';
import type { ArchiveFormat } from './process/stream.ts';
import type { Protection } from '../protection/rules.ts';
import type { ProcessPool } from './process/pool.ts';
import { WsgiPool, type WsgiApp } from './process/wsgi.ts';
import type { TransportMetrics } from '../telemetry/transport-metrics.ts';
import { inSpan, tracingOn } from '../telemetry/spans.ts';

/**
 * What a request to a repository's clone URL asks for: `read` (pull: repo:read), `write` (push:
 * repo:write and membership), or `sync`, where the HTTP layer cannot tell (Fossil: clone and push
 * are the same request): the backend decides by REMOTE_USER (see `VcsTransport.remoteUser`).
 */
export type TransportOp = 'read' | 'write' | 'sync';

/**
 * The verdict on a request at a clone URL: a wire-protocol request (with the query string the
 * backend gets), a browser's plain visit (answered with a hint), or something else (refused).
 */
export type WireRequest =
  /** `mutates`: the request may change the repository (it runs under the push lock). */
  | { kind: 'wire'; op: TransportOp; mutates: boolean; query: string }
  | { kind: 'hint' }
  | { kind: 'refuse'; status: 400 | 404; message: string };

export type BackendRequest = {
  repoPath: string;
  /** Path under the clone URL, starting with '/' or empty. */
  subpath: string;
  /** The public path of the clone URL (SCRIPT_NAME). */
  scriptName: string;
  query: string;
  remoteUser: string | undefined;
  /** Triad authorised this request to write (git receive-pack, hg unbundle/pushkey). */
  write: boolean;
  /**
   * A push to a repository with protection rules: the rules and the pusher, for the kind's check
   * of the refs the push moves (src/protection/rules.ts); undefined when there is nothing to check.
   */
  protection?: Protection | undefined;
  req: IncomingMessage;
  res: ServerResponse;
  input: { file: string; size: number } | undefined;
  output?: string;
  tmpDir: string;
  /** A directory for per-process CGI scripts (Fossil writes one per repository there). */
  scriptDir: string;
  signal: AbortSignal;
};

/** The program a kind serves one request with, and what it needs beyond the request's CGI variables. */
export type CgiProgram = Pick<CgiRequest, 'command' | 'args' | 'pathInfo' | 'env'>;

/**
 * Or the pooled WSGI program (process/wsgi.ts) that serves a kind's requests, with the request's CGI
 * variables beyond the derived ones and the worker's own fields.
 */
export type WsgiProgram = {
  wsgi: WsgiApp;
  pathInfo: string;
  env: Record<string, string>;
  fields: Record<string, unknown>;
};

/**
 * One kind's side of the clone URL. Only the VCS wire protocols are served there (see each
 * kind's `classify`): the web UIs of hgweb and Fossil, and git's dumb protocol, would serve pushed
 * files (HTML, JavaScript) from the service's own origin. A parameter the decision depends on may
 * appear only once, and the backend gets the query string re-encoded from what Triad read, so both
 * agree on what the request does.
 */
export interface VcsTransport {
  classify(
    method: string,
    subpath: string,
    query: URLSearchParams,
    contentType: string | undefined,
  ): WireRequest;
  /** What a browser visiting the clone URL is told. */
  cloneHint(url: string): string;
  /**
   * REMOTE_USER for an authorised request: the caller's user name, or for a `sync` backend the
   * repository user whose rights match `canWrite` (computed by the caller only for `sync`).
   */
  remoteUser(username: string | undefined, canWrite: boolean): string | undefined;
  /**
   * Optional, for a request `classify` found mutating: does its spooled body show that it changes
   * nothing after all? Such a request is served like a read, without the push lock (git's probe
   * before sending a large pack: a receive-pack body holding only a flush packet).
   */
  inert?(input: { file: string; size: number } | undefined): Promise<boolean>;
  /**
   * The program for one request: a CGI program started for it (may prepare the repository or a
   * script first), or a pooled WSGI worker.
   */
  backend(b: BackendRequest): Promise<CgiProgram | WsgiProgram>;
}

/** A GET or HEAD of the clone URL itself without parameters: a person with a browser. */
export function browsing(method: string, subpath: string, query: URLSearchParams): boolean {
  return atRoot(subpath) && (method === 'GET' || method === 'HEAD') && query.size === 0;
}

/**
 * The first step of a `classify` that decides by one query parameter: a repeated parameter is
 * refused (400), a browser's plain visit gets the hint, else the parameter's value (if any).
 */
export function wireParam(
  method: string,
  subpath: string,
  query: URLSearchParams,
  name: string,
): { verdict: WireRequest } | { value: string | undefined } {
  const values = query.getAll(name);
  if (values.length > 1)
    return { verdict: { kind: 'refuse', status: 400, message: `repeated ${name} parameter` } };
  if (browsing(method, subpath, query)) return { verdict: { kind: 'hint' } };
  return { value: values[0] };
}

export function atRoot(subpath: string): boolean {
  return subpath === '' || subpath === '/';
}

export const notFound = { kind: 'refuse', status: 404, message: 'not found' } as const;

export function cloneHint(label: string, command: string): string {
  return `This is the clone URL of a ${label} repository.\nClone it with: ${command}\n`;
}

export type TransportServerOptions = {
  /** Backend runs (CGI processes and WSGI requests, every kind) at once. */
  concurrency: number;
  /** Requests waiting for a run beyond the running ones; more are refused (`GateFull`, 503). */
  queue: number;
  /** Processes per WSGI program (Mercurial's hgweb workers). */
  wsgiWorkers: number;
  /** Settings given to every WSGI worker in its environment (hgwsgi.py: TRIAD_HG_STREAM_CLONES). */
  wsgiEnv?: Record<string, string>;
  /** An idle WSGI worker is closed after this long. */
  wsgiIdleMs?: number;
  /** The server's process pool, which keeps the WSGI workers. */
  pool: ProcessPool;
  /** Niceness added to every backend process (process/priority.ts); 0 or absent: the server's own. */
  nice?: number;
  /** Longest a source archive may wait for its slot and run (`archive`); none when absent. */
  timeoutMs?: number;
  /** Transfer, queue and refusal metrics (telemetry/transport-metrics.ts). */
  metrics?: TransportMetrics;
};

/**
 * What serves the clone URLs of one server: the concurrency cap and queue every transport run
 * passes (`limiter`), and the pools of long-lived WSGI workers. Closed at shutdown. Source
 * archives, the other bulk reads anyone may start, pass the same cap (`archive`).
 */
export class TransportServers {
  readonly limiter: Gate;
  private readonly pools = new Map<string, WsgiPool>();
  private readonly opts: TransportServerOptions;

  constructor(opts: TransportServerOptions) {
    this.opts = opts;
    this.limiter = new Gate(opts.concurrency, opts.queue, () => opts.metrics?.refused('queue_full'));
    opts.metrics?.observeQueue(() => this.limiter.load());
  }

  /** The transfer metrics, when the server keeps them. */
  get metrics(): TransportMetrics | undefined {
    return this.opts.metrics;
  }

  /** The pool of a WSGI program (started on first use). */
  pool(app: WsgiApp): WsgiPool {
    let p = this.pools.get(app.name);
    if (p === undefined) {
      p = new WsgiPool(
        { ...app, env: { ...app.env, ...this.opts.wsgiEnv } },
        {
          workers: this.opts.wsgiWorkers,
          pool: this.opts.pool,
          nice: this.nice,
          ...(this.opts.wsgiIdleMs === undefined ? {} : { idleMs: this.opts.wsgiIdleMs }),
        },
      );
      this.pools.set(app.name, p);
    }
    return p;
  }

  /**
   * A source archive (`VcsDriver.archive`) under the cap, as a clone's backend run: it waits for a
   * slot in the same queue (`GateFull` when the queue is full, or when no slot came within
   * `timeoutMs`) and holds it until the stream ends or fails, its reader abandons it, or `signal`
   * aborts (the client left) or `timeoutMs` passes, which also stop the process. Runs at the
   * backends' niceness. Rejects with the signal's reason when the client left while waiting.
   */
  async archive(
    driver: VcsDriver,
    a: { dir: string; commit: string; format: ArchiveFormat; prefix: string },
    signal: AbortSignal,
  ): Promise<AsyncIterable<Buffer>> {
    const limit = this.opts.timeoutMs;
    const run = limit === undefined ? signal : AbortSignal.any([signal, AbortSignal.timeout(limit)]);
    let leave: () => void;
    try {
      leave = await this.limiter.enter(run);
    } catch (e) {
      if (!signal.aborted && run.aborted) {
        this.opts.metrics?.refused('slot_timeout');
        throw new GateFull('no slot free within the transfer timeout');
      }
      throw e;
    }
    const body = driver.archive(a.dir, a.commit, a.format, a.prefix, this.nice, run);
    return holdWhileRead(body, leave, run);
  }

  /** Process ids of the live WSGI workers (tests). */
  workerPids(): number[] {
    return [...this.pools.values()].flatMap((p) => p.pids());
  }

  /** Niceness added to the backend processes. */
  get nice(): number {
    return this.opts.nice ?? 0;
  }

  close(): void {
    for (const p of this.pools.values()) p.close();
    this.pools.clear();
  }
}

/**
 * Serves one request with the kind's own HTTP backend (git http-backend, hgweb, fossil CGI). The
 * caller holds a slot of `servers.limiter`.
 */
export async function serveBackend(
  driver: VcsDriver,
  b: BackendRequest,
  servers: TransportServers,
): Promise<CgiResult> {
  if (!tracingOn()) return backendRun(driver, b, servers);
  const operation = wireOperation(b.subpath, b.query);
  const attributes = { 'vcs.kind': driver.kind, 'vcs.operation': operation, 'vcs.push': b.write };
  return inSpan(`${driver.kind} backend ${operation}`, { attributes }, async (span) => {
    const r = await backendRun(driver, b, servers);
    span.setAttribute('vcs.backend.outcome', r.outcome);
    if (r.code !== null) span.setAttribute('process.exit.code', r.code);
    return r;
  });
}

/**
 * What a wire request asks its backend for, as a span names it: git's service
 * (`git-receive-pack`, `info/refs?service=…` as its service), Mercurial's `cmd`, else the subpath
 * (Fossil: `xfer` at the root).
 */
export function wireOperation(subpath: string, query: string): string {
  const q = new URLSearchParams(query);
  // Mercurial's `cmd` first: its query is the client's own, where any `service=` may ride along
  // (its `cmd` is one of the known commands, and git's query holds only its known service)
  const named = q.get('cmd') ?? q.get('service');
  if (named !== null) return named;
  const last = subpath
    .split('/')
    .filter((p) => p !== '')
    .at(-1);
  return last ?? 'xfer';
}

async function backendRun(
  driver: VcsDriver,
  b: BackendRequest,
  servers: TransportServers,
): Promise<CgiResult> {
  if (driver.serve !== undefined) return driver.serve(b, b.output === undefined ? servers.nice : 0);
  const program = await driver.transport.backend(b);
  const common = {
    req: b.req,
    res: b.res,
    scriptName: b.scriptName,
    queryString: b.query,
    remoteUser: b.remoteUser,
    input: b.input,
    tmpDir: b.tmpDir,
    signal: b.signal,
    ...(b.output === undefined ? {} : { output: b.output }),
  };
  if ('wsgi' in program) {
    const { wsgi, ...rest } = program;
    return servers.pool(wsgi).serve({ ...common, ...rest });
  }
  // A push (its answer held, `output`) runs at the server's own priority: only members push, one
  // at a time per repository, and its author waits on it; clones and fetches, which anyone may
  // start in any number, run below the API.
  return runCgi({ ...common, ...program, nice: b.output === undefined ? servers.nice : 0 });
}
