/**
 * A storage node's internal port (docs/storage.md): the `VcsDriver` contract over HTTP for the
 * servers (vcs/remote/ is the other side; wire.ts the shapes). Every request but the probes
 * carries the shared secret and the protocol version.
 *
 * The node is the single writer of its repositories: calls that change a repository (or must not
 * see a change half applied: `recover`, `snapshot`) and a mutating backend run, from its first
 * byte to its exit, hold the node's own lock of that repository (`RepoLocks`). A server that dies
 * while its push runs here cannot let the next push in before the first one's backend is over,
 * whatever the database lock says. After a change the node drops its readers of the repository
 * and writes the change's backup, before it answers.
 */
import { timingSafeEqual } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { VCS_KINDS, type Vcs, type VcsKind } from '../vcs/index.ts';
import { hasBody, receiveBody, type Spool } from '../vcs/process/spool.ts';
import { GateFull } from '../vcs/process/gate.ts';
import { serveBackend, type BackendRequest, type TransportServers } from '../vcs/transport.ts';
import type { CgiResult } from '../vcs/process/cgi.ts';
import {
  BACKEND,
  fromProtectionHeader,
  CALLS,
  CHANGING_CALLS,
  LOCKED_CALLS,
  NOT_HERE_HEADER,
  PROTOCOL_VERSION,
  REPO_NAME,
  SIZE_HEADER,
  VERSION_HEADER,
  decode,
  encode,
  errorToWire,
  fromHeaderText,
  type CallRequest,
} from '../vcs/remote/wire.ts';
import { RepoLocks } from './locks.ts';
import { invoke, resolveThen } from './calls.ts';
import { digest, exists, fail, finish, json, readBody, Refused, signalOf, text } from './http.ts';
import { exportRepository, importRepository, releaseRepository } from './copies.ts';

export type NodeDeps = {
  root: string;
  vcs: Vcs;
  servers: TransportServers;
  spool: Spool;
  log: Logger;
  secret: string;
  /** Longest a backend run may take (the transport timeout). */
  timeoutMs: number;
  /** Writes a repository's backup after a change (none without a blob store). */
  backup?: (repo: { id: number; kind: VcsKind; dir: string }) => Promise<void>;
  /** Removes a deleted repository's backup. */
  dropBackup?: (id: number) => Promise<void>;
  /** Whether the node is ready (registered). */
  ready: () => boolean;
  /** Prometheus text of the node's metrics. */
  metrics: () => Promise<{ contentType: string; body: string }>;
  observe: (what: string, outcome: string, seconds: number) => void;
};

const notHere = () => new Refused(404, 'repository not on this node', { [NOT_HERE_HEADER]: '1' });

/** Longest a repository leaving the node waits for the reads under way on it. */
const LEAVE_WAIT_MS = 60_000;

export class StorageNodeServer {
  private readonly d: NodeDeps;
  readonly locks = new RepoLocks();
  /**
   * Repositories seen on the volume since the start: only this process adds or removes them
   * (a restore only adds), so a read need not look at the disk again (a stat per call).
   */
  private readonly known = new Set<string>();
  private readonly secretHash: Buffer;

  constructor(deps: NodeDeps) {
    this.d = deps;
    this.secretHash = digest(deps.secret);
  }

  /** The request handler of the node's HTTP server. */
  handle = (req: IncomingMessage, res: ServerResponse): void => {
    const started = process.hrtime.bigint();
    const route = (req.url ?? '/').split('?')[0] ?? '/';
    this.dispatch(route, req, res)
      .then(
        () => 'ok',
        (e: unknown) => {
          fail(res, e, this.d.log);
          return e instanceof Refused ? String(e.status) : 'error';
        },
      )
      .then((outcome) => {
        const s = Number(process.hrtime.bigint() - started) / 1e9;
        this.d.observe(route.replace('/internal/v1/', ''), outcome, s);
      })
      .catch(() => undefined);
  };

  private async dispatch(route: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (route === '/healthz') return text(res, 200, 'ok\n');
    if (route === '/readyz')
      return this.d.ready() ? text(res, 200, 'ready\n') : text(res, 503, 'registering\n');
    if (route === '/metrics') {
      const m = await this.d.metrics();
      res.writeHead(200, { 'content-type': m.contentType }).end(m.body);
      return;
    }
    this.authorise(req);
    const q = new URL(req.url ?? '/', 'http://node').searchParams;
    switch (route) {
      case '/internal/v1/locks':
        return json(res, 200, this.locks.held());
      case '/internal/v1/call':
        return this.call(req, res);
      case '/internal/v1/backend':
        return this.backend(req, res);
      case '/internal/v1/cat':
        return this.cat(q, req, res);
      case '/internal/v1/archive':
        return this.archive(q, req, res);
      case '/internal/v1/export': {
        const { repo, dir } = await this.repo(q.get('repo'), q.get('kind'));
        return this.locks.run(repo, () => exportRepository(this.d.root, repo, dir, res, signalOf(res)));
      }
      case '/internal/v1/import': {
        const repo = this.name(q.get('repo'), q.get('kind'));
        const from = q.get('from') ?? '';
        if (!/^https?:\/\//.test(from)) throw new Refused(400, 'from must be a node address');
        const ws = await this.d.spool.workspace();
        try {
          await this.locks.run(repo, async () => {
            await importRepository({ root: this.d.root, repo, from, secret: this.d.secret, work: ws.dir });
            this.known.add(repo);
            this.d.vcs.invalidate(path.join(this.d.root, repo));
          });
        } finally {
          await ws.remove();
        }
        return json(res, 200, { result: encode(null) });
      }
      default:
        throw new Refused(404, 'no such route');
    }
  }

  private authorise(req: IncomingMessage): void {
    const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!timingSafeEqual(digest(given), this.secretHash)) throw new Refused(401, 'wrong storage secret');
    const version = req.headers[VERSION_HEADER];
    if (version !== PROTOCOL_VERSION) {
      throw new Refused(
        400,
        `storage protocol ${String(version ?? 'none')} asked, this node speaks ${PROTOCOL_VERSION}: run servers and nodes of one version`,
      );
    }
  }

  /** A repository name checked against its kind. */
  private name(repo: string | null | undefined, kind: string | null | undefined): string {
    const m = REPO_NAME.exec(repo ?? '');
    if (m === null || m[2] !== kind) throw new Refused(400, 'bad repository name or kind');
    return repo!;
  }

  /** A repository this node holds: 404 with the not-here header when it does not (it moved). */
  private async repo(repo: string | null | undefined, kind: string | null | undefined, create = false) {
    const name = this.name(repo, kind);
    const dir = path.join(this.d.root, name);
    if (!create && (this.locks.isLeaving(name) || !(await this.present(name, dir)))) throw notHere();
    return { repo: name, dir, kind: kind as VcsKind, id: Number(REPO_NAME.exec(name)![1]) };
  }

  private async present(name: string, dir: string): Promise<boolean> {
    if (this.known.has(name)) return true;
    if (!(await exists(dir))) return false;
    this.known.add(name);
    return true;
  }

  /**
   * A repository for a read that takes no lock: counted while it runs (`done`), so a move lets
   * the repository go only once such reads ended. Counted before its files are looked for, so a
   * move cannot slip in between.
   */
  private async reading(repo: string | null | undefined, kind: string | null | undefined) {
    const name = this.name(repo, kind);
    const done = this.locks.read(name);
    if (done === undefined) throw notHere();
    try {
      return { ...(await this.repo(repo, kind)), done };
    } catch (e) {
      done();
      throw e;
    }
  }

  private async call(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse(await readBody(req)) as CallRequest;
    const target = body.target;
    if (!(target in CALLS) || !(CALLS[target] as readonly string[]).includes(body.method))
      throw new Refused(400, `no such call: ${String(body.target)}.${String(body.method)}`);
    if (!(VCS_KINDS as readonly string[]).includes(body.kind)) throw new Refused(400, 'bad kind');
    const locked = LOCKED_CALLS.has(body.method);
    const r = locked
      ? {
          ...(await this.repo(body.repo, body.kind, body.method === 'init' || body.method === 'remove')),
          done: () => undefined,
        }
      : await this.reading(body.repo, body.kind);
    const args = decode(body.args) as unknown[];
    const run = async (): Promise<unknown> => {
      if (target === 'reader' && body.method === 'resolveThen')
        return resolveThen(this.d.vcs.reader(r.kind, r.dir), args);
      if (target === 'reader') return invoke(this.d.vcs.reader(r.kind, r.dir), body.method, args);
      if (target === 'ops') return invoke(this.d.vcs.ops(r.kind), body.method, [r.dir, ...args]);
      if (body.method === 'remove') return this.remove(r, args[0] as { keepBackup?: boolean } | undefined);
      if (body.method === 'prepare') {
        this.d.vcs.driver(r.kind).prepare?.(r.dir);
        return undefined;
      }
      return invoke(this.d.vcs.driver(r.kind), body.method, [r.dir, ...args]);
    };
    let result: unknown;
    try {
      result = locked
        ? await this.locks.run(r.repo, async () => {
            try {
              return await run();
            } finally {
              if (body.method !== 'snapshot') this.d.vcs.invalidate(r.dir);
              if (CHANGING_CALLS.has(body.method)) await this.backup(r);
            }
          })
        : await run();
    } catch (e) {
      json(res, 200, { error: errorToWire(e) });
      return;
    } finally {
      r.done();
    }
    json(res, 200, { result: encode(result) });
  }

  /** Removes a repository (deleted, or moved away: `keepBackup`), after in-flight reads had their time. */
  private async remove(r: { repo: string; dir: string; id: number }, opts: { keepBackup?: boolean } = {}) {
    // reads under way end first (a clone's request that began here), new ones go to the row's node
    await this.locks.leave(r.repo, LEAVE_WAIT_MS, async () => {
      this.d.vcs.invalidate(r.dir);
      this.known.delete(r.repo);
      await releaseRepository(this.d.root, r.repo);
    });
    if (opts.keepBackup !== true) await this.d.dropBackup?.(r.id);
  }

  private async backup(r: { id: number; kind: VcsKind; dir: string }): Promise<void> {
    if (this.d.backup === undefined) return;
    try {
      await this.d.backup(r);
    } catch (err) {
      // the change is made and kept; the next change's backup carries it too
      this.d.log.error({ err, repo: r.id }, 'backup after a change failed');
    }
  }

  private async backend(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const h = req.headers;
    const mutates = h[BACKEND.mutates] === '1';
    const [repo, kind] = [h[BACKEND.repo] as string | undefined, h[BACKEND.kind] as string | undefined];
    // a change takes the lock (a move waits for it); a read is counted (a move waits for it too)
    const r = mutates
      ? { ...(await this.repo(repo, kind)), done: () => undefined }
      : await this.reading(repo, kind);
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error('backend timed out')), this.d.timeoutMs);
    // A read stops when its server leaves. A change whose body is all here runs to its end (and
    // its backup) even then: its outcome no longer depends on that server, whose successor
    // records it as a change it missed; the lock keeps the next change waiting until then.
    let received = false;
    const onClose = () => {
      if (!res.writableFinished && !(mutates && received)) ac.abort(new Error('server left'));
    };
    res.on('close', onClose);
    const ws = await this.d.spool.workspace();
    let leave: (() => void) | undefined;
    try {
      let input: BackendRequest['input'];
      if (hasBody(req)) {
        const file = path.join(ws.dir, 'body');
        input = { file, size: await receiveBody(req, file, Number.MAX_SAFE_INTEGER, ac.signal) };
      }
      received = true;
      const tmpDir = path.join(ws.dir, 'tmp');
      await fs.mkdir(tmpDir);
      req.url = fromHeaderText(h[BACKEND.uri]) ?? '/';
      const remoteUser = fromHeaderText(h[BACKEND.remoteUser]);
      const b: BackendRequest = {
        repoPath: r.dir,
        subpath: fromHeaderText(h[BACKEND.subpath]) ?? '',
        scriptName: fromHeaderText(h[BACKEND.scriptName]) ?? '/',
        query: fromHeaderText(h[BACKEND.query]) ?? '',
        remoteUser,
        write: h[BACKEND.write] === '1',
        protection: fromProtectionHeader(h[BACKEND.protection]),
        req,
        res,
        input,
        tmpDir,
        scriptDir: await this.d.spool.scriptDir(),
        signal: ac.signal,
      };
      const driver = this.d.vcs.driver(r.kind);
      leave = await this.d.servers.limiter.enter(ac.signal);
      if (!mutates) {
        finish(res, await serveBackend(driver, b, this.d.servers));
        return;
      }
      const output = path.join(ws.dir, 'response');
      const result = await this.locks.run(r.repo, async (): Promise<CgiResult> => {
        if (ac.signal.aborted) return { outcome: 'aborted', code: null, stderr: '' };
        try {
          return await serveBackend(driver, { ...b, output }, this.d.servers);
        } finally {
          this.d.vcs.invalidate(r.dir);
          await this.backup(r);
        }
      });
      leave();
      if (result.outcome !== 'ok') return finish(res, result);
      await pipeline(createReadStream(output), res);
    } catch (e) {
      if (e instanceof GateFull) throw new Refused(503, 'storage node busy', { 'Retry-After': '2' });
      throw e;
    } finally {
      leave?.();
      clearTimeout(timer);
      res.off('close', onClose);
      await ws.remove();
      r.done();
    }
  }

  private async cat(q: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const r = await this.reading(q.get('repo'), q.get('kind'));
    try {
      const size = q.get('size');
      const file = await this.d.vcs
        .driver(r.kind)
        .catFile(r.dir, q.get('commit') ?? '', q.get('file') ?? '', {
          size: size === null ? undefined : Number(size),
          head: Number(q.get('head') ?? 0),
          nice: Number(q.get('nice') ?? 0),
        });
      res.writeHead(200, { 'content-type': 'application/octet-stream', [SIZE_HEADER]: String(file.size) });
      await pipeline(file.body, res);
    } finally {
      r.done();
    }
    void req;
  }

  private async archive(q: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const r = await this.reading(q.get('repo'), q.get('kind'));
    try {
      await this.archiveOf(r, q, res);
    } finally {
      r.done();
    }
    void req;
  }

  private async archiveOf(r: { kind: VcsKind; dir: string }, q: URLSearchParams, res: ServerResponse) {
    const format = q.get('format') === 'zip' ? 'zip' : 'tar.gz';
    const signal = signalOf(res);
    let body: AsyncIterable<Buffer>;
    try {
      body = await this.d.servers.archive(
        this.d.vcs.driver(r.kind),
        { dir: r.dir, commit: q.get('commit') ?? '', format, prefix: q.get('prefix') ?? 'archive' },
        signal,
      );
    } catch (e) {
      if (e instanceof GateFull) throw new Refused(503, 'storage node busy', { 'Retry-After': '2' });
      throw e;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    await pipeline(body, res);
  }
}
