import http from 'node:http';
import type { Readable } from 'node:stream';
import { RepositoryUnavailable as StorageUnavailable } from '../../storage/blob.ts';
import {
  CALLS,
  NOT_HERE_HEADER,
  PROTOCOL_VERSION,
  REPO_NAME,
  VERSION_HEADER,
  decode,
  encode,
  errorFromWire,
  type CallTarget,
  type WireError,
} from './wire.ts';

/** Where the storage nodes are: the registry's addresses and the repositories' rows. */
export type NodeLocator = {
  /** The address of a node (`http://host:port`), undefined for an unknown node. */
  address(node: string): Promise<string | undefined>;
  /** The node a repository's row names now (read afresh: a move may just have switched it). */
  nodeOf(repoId: number): Promise<string | undefined>;
};

/** Where a repository is on the nodes: the storage path a server keeps for it is `<node>/<id>.<kind>`. */
export type Placed = { node: string; repo: string; id: number };

export function placed(dir: string): Placed {
  const i = dir.indexOf('/');
  const repo = dir.slice(i + 1);
  const m = REPO_NAME.exec(repo);
  if (i <= 0 || m === null) throw new Error(`not a storage node path: ${dir}`);
  return { node: dir.slice(0, i), repo, id: Number(m[1]) };
}

export function nodePath(node: string, repo: string): string {
  return `${node}/${repo}`;
}

export type NodeRequest = {
  method: string;
  path: string;
  headers?: Record<string, string | string[]>;
  /** Made again for a retry at the repository's new node (a stream can be read once). */
  body?: () => Buffer | Readable;
  signal?: AbortSignal;
  /** To the node the path names, whatever this client learned of a move (a move's own calls). */
  exact?: boolean;
};

/** How long a node may take to accept a connection before it counts as unavailable. */
const CONNECT_TIMEOUT_MS = 3000;

/**
 * The servers' side of the internal protocol: every request carries the shared secret and the
 * protocol version, goes to the node the repository's storage path names, and follows the
 * repository once when that node answers that it does not hold it (a move switched its row
 * since): the row is read again and the request sent to the node it names. A node that cannot
 * be reached makes the request fail with `StorageUnavailable` (503 `storage_unavailable`), which
 * touches no other node's repositories.
 */
export class StorageClient {
  private readonly secret: string;
  private readonly locator: NodeLocator;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 512, keepAliveMsecs: 10_000 });
  /** Repositories found elsewhere than their storage path says (moved while a handle was held). */
  private readonly moved = new Map<string, string>();

  constructor(opts: { secret: string; locator: NodeLocator }) {
    this.secret = opts.secret;
    this.locator = opts.locator;
  }

  /** Sends `r` about the repository at `dir`; the answer's body is the caller's to read. */
  async request(dir: string, r: NodeRequest): Promise<http.IncomingMessage> {
    const where = placed(dir);
    const first = r.exact === true ? where.node : (this.moved.get(where.repo) ?? where.node);
    const res = await this.send(first, r);
    if (res.statusCode !== 404 || res.headers[NOT_HERE_HEADER] === undefined || r.exact === true) return res;
    res.resume();
    const now = await this.locator.nodeOf(where.id);
    if (now === undefined || now === first) return this.notHere(where, res);
    this.moved.set(where.repo, now);
    const again = await this.send(now, r);
    if (again.statusCode === 404 && again.headers[NOT_HERE_HEADER] !== undefined) {
      again.resume();
      return this.notHere(where, again);
    }
    return again;
  }

  private notHere(where: Placed, res: http.IncomingMessage): never {
    void res;
    throw new StorageUnavailable(`repository ${where.id} is not on its storage node (being moved?)`);
  }

  /** A JSON call of the driver contract (wire.ts): its decoded result, or its error rethrown. */
  async call(
    dir: string,
    kind: string,
    target: CallTarget,
    method: string,
    args: unknown[],
    opts: { exact?: boolean } = {},
  ): Promise<unknown> {
    if (!(CALLS[target] as readonly string[]).includes(method)) throw new Error(`no such call: ${method}`);
    const repo = placed(dir).repo;
    const body = Buffer.from(JSON.stringify({ repo, kind, target, method, args: encode(args) }));
    const res = await this.request(dir, {
      method: 'POST',
      path: '/internal/v1/call',
      headers: { 'content-type': 'application/json' },
      body: () => body,
      ...opts,
    });
    const text = await readText(res);
    if (res.statusCode !== 200) throw refusal(res, text);
    const out = JSON.parse(text) as { result?: unknown; error?: WireError };
    if (out.error !== undefined) throw errorFromWire(out.error);
    return decode(out.result);
  }

  /** One request to a node by name. */
  async send(node: string, r: NodeRequest): Promise<http.IncomingMessage> {
    const address = await this.locator.address(node);
    if (address === undefined) throw new StorageUnavailable(`storage node ${node} is not registered`);
    const url = new URL(r.path, address);
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(url, {
        method: r.method,
        agent: this.agent,
        headers: {
          ...r.headers,
          authorization: `Bearer ${this.secret}`,
          [VERSION_HEADER]: PROTOCOL_VERSION,
        },
        ...(r.signal === undefined ? {} : { signal: r.signal }),
      });
      let timer: NodeJS.Timeout | undefined;
      req.on('socket', (s) => {
        if (!s.connecting) return;
        timer = setTimeout(() => req.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
        s.once('connect', () => clearTimeout(timer));
      });
      req.on('response', (res) => {
        clearTimeout(timer);
        resolve(res);
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        if (r.signal?.aborted === true) reject(r.signal.reason instanceof Error ? r.signal.reason : err);
        else
          reject(
            new StorageUnavailable(`storage node ${node} is unavailable: ${err.message}`, { cause: err }),
          );
      });
      const body = r.body?.();
      if (body === undefined) req.end();
      else if (Buffer.isBuffer(body)) req.end(body);
      else {
        body.on('error', (err) => req.destroy(err));
        body.pipe(req);
      }
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export async function readText(res: http.IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of res) parts.push(c as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** A node refused the request itself (wrong secret, another protocol version, a bad request). */
export function refusal(res: http.IncomingMessage, text: string): Error {
  let message = text.slice(0, 500);
  try {
    message = (JSON.parse(text) as { error: { message: string } }).error.message;
  } catch {
    // not JSON: the text as it came
  }
  if (res.statusCode === 503) return new StorageUnavailable(`storage node busy: ${message}`);
  return new Error(`storage node refused the request (${res.statusCode ?? 0}): ${message}`);
}
