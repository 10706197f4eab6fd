/**
 * The `Vcs` of a server whose repositories are on storage nodes (`TRIAD_STORAGE=nodes`): every
 * call that names a repository goes to the node its storage path (`<node>/<id>.<kind>`) names,
 * through `StorageClient`; what needs no repository (constants, the clone URL's request
 * classification, `refHeads` of a snapshot) is the local drivers' own. The node keeps the pooled
 * readers and their caches and drops them after each change it makes, so no server replica keeps
 * a reader of its own that could answer stale refs.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { VcsKind } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import type { Vcs } from '../index.ts';
import type { VcsOps } from '../ops.ts';
import type { CgiResult } from '../process/cgi.ts';
import type { OpenedFile } from '../process/stream.ts';
import type { ReadAhead, RepoReader } from '../reader.ts';
import type { BackendRequest } from '../transport.ts';
import { placed, readText, refusal, type StorageClient } from './client.ts';
import {
  BACKEND,
  protectionHeader,
  CALLS,
  SIZE_HEADER,
  UNFORWARDED,
  errorFromWire,
  headerText,
  type CallTarget,
  type WireError,
} from './wire.ts';

type Fn = (...args: never[]) => Promise<unknown>;

export function createRemoteVcs(opts: { client: StorageClient; local: Vcs }): Vcs {
  const { client, local } = opts;
  const proxies = (kind: VcsKind, target: CallTarget, dir: string | undefined) => {
    const out: Record<string, Fn> = {};
    for (const method of CALLS[target]) {
      out[method] = (...args: unknown[]) =>
        dir === undefined
          ? client.call(args[0] as string, kind, target, method, args.slice(1))
          : client.call(dir, kind, target, method, args);
    }
    return out;
  };
  const ahead = new ReadsAhead();
  const reader = (kind: VcsKind, dir: string): RepoReader => {
    const calls = proxies(kind, 'reader', dir);
    // only kinds whose VCS numbers commits itself have `revs` (driver.ts: `arrivals` otherwise)
    const numbered = local.driver(kind).arrivals === undefined;
    const read =
      (method: ReadAhead['method']) =>
      (at: string, ...args: unknown[]): Promise<unknown> =>
        ahead.take(dir, method, at, args) ?? calls[method]!(at as never, ...(args as never[]));
    const r: RepoReader = {
      ...(calls as unknown as RepoReader),
      tree: read('tree') as RepoReader['tree'],
      blob: read('blob') as RepoReader['blob'],
      log: read('log') as RepoReader['log'],
      changeset: read('changeset') as RepoReader['changeset'],
      resolveThen: async (rev, next) => {
        const out = (await client.call(dir, kind, 'reader', 'resolveThen', [rev, next])) as {
          at: string | undefined;
          value?: unknown;
          error?: WireError;
        };
        const outcome =
          out.error === undefined ? Promise.resolve(out.value) : Promise.reject(errorFromWire(out.error));
        outcome.catch(() => undefined); // read (and rethrown) by the read it was made for, if it comes
        ahead.put(dir, next.method, out.at ?? rev, next.args, outcome);
        return out.at;
      },
      busy: () => false,
      close: () => undefined,
    };
    if (!numbered) delete r.revs;
    return r;
  };
  const opsOf = (kind: VcsKind): VcsOps => ({
    kind,
    ...(proxies(kind, 'ops', undefined) as unknown as Omit<VcsOps, 'kind'>),
  });
  const ops: Record<VcsKind, VcsOps> = { git: opsOf('git'), hg: opsOf('hg'), fossil: opsOf('fossil') };
  const driverOf = (kind: VcsKind): VcsDriver => {
    const base = local.driver(kind);
    const calls = proxies(kind, 'driver', undefined);
    const d: VcsDriver = {
      kind,
      constants: base.constants,
      transport: base.transport,
      init: calls.init as VcsDriver['init'],
      recover: calls.recover as VcsDriver['recover'],
      snapshot: calls.snapshot as VcsDriver['snapshot'],
      moves: calls.moves as VcsDriver['moves'],
      filesAt: calls.filesAt as VcsDriver['filesAt'],
      refHeads: (s) => base.refHeads(s),
      openReader: (dir) => reader(kind, dir),
      prepare: (dir) => {
        client.call(dir, kind, 'driver', 'prepare', []).catch(() => undefined);
      },
      catFile: (dir, commit, file, known) => catFile(client, kind, dir, { commit, file, ...known }),
      archive: (dir, commit, format, prefix, nice, signal) =>
        archive(client, kind, dir, { commit, format, prefix, nice: String(nice) }, signal),
      serve: (b, nice) => serve(client, kind, b, nice),
      createOps: () => ops[kind],
    };
    if (base.arrivals !== undefined) d.arrivals = calls.arrivals as VcsDriver['arrivals'];
    return d;
  };
  const drivers: Record<VcsKind, VcsDriver> = {
    git: driverOf('git'),
    hg: driverOf('hg'),
    fossil: driverOf('fossil'),
  };
  return {
    driver: (kind) => drivers[kind],
    ops: (kind) => ops[kind],
    reader,
    remove: async (dir) => {
      await client.call(dir, placed(dir).repo.split('.')[1] ?? '', 'driver', 'remove', []);
    },
    // the node drops its readers after each change it makes
    invalidate: () => undefined,
    closeProcesses: () => local.closeProcesses(),
    close: async (graceMs) => {
      client.close();
      await local.close(graceMs);
    },
  };
}

/**
 * Reads made ahead by `resolveThen`, each waiting for the one call it was made for (exactly that
 * method, commit and arguments), taken once, dropped after a few seconds or beyond a few hundred.
 */
class ReadsAhead {
  private readonly kept = new Map<string, { value: Promise<unknown>; at: number }>();

  private static key(dir: string, method: string, at: string, args: unknown[]): string {
    return JSON.stringify([dir, method, at, args]);
  }

  put(dir: string, method: string, at: string, args: unknown[], value: Promise<unknown>): void {
    const now = Date.now();
    if (this.kept.size >= 256) {
      for (const [k, v] of this.kept) if (this.kept.size >= 256 || now - v.at > 5000) this.kept.delete(k);
    }
    this.kept.set(ReadsAhead.key(dir, method, at, args), { value, at: now });
  }

  take(dir: string, method: string, at: string, args: unknown[]): Promise<unknown> | undefined {
    const k = ReadsAhead.key(dir, method, at, args);
    const hit = this.kept.get(k);
    if (hit === undefined) return undefined;
    this.kept.delete(k);
    return Date.now() - hit.at > 5000 ? undefined : hit.value;
  }
}

function query(fields: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) q.set(k, String(v));
  return q.toString();
}

async function ok(res: IncomingMessage): Promise<IncomingMessage> {
  if (res.statusCode === 200) return res;
  throw refusal(res, await readText(res));
}

/** `catFile` from the node: answers once the size and the first `head` bytes are here. */
async function catFile(
  client: StorageClient,
  kind: VcsKind,
  dir: string,
  k: { commit: string; file: string; size: number | undefined; head: number; nice: number },
): Promise<OpenedFile> {
  const { repo } = placed(dir);
  const q = query({ repo, kind, commit: k.commit, file: k.file, size: k.size, head: k.head, nice: k.nice });
  const res = await ok(await client.request(dir, { method: 'GET', path: `/internal/v1/cat?${q}` }));
  const size = Number(res.headers[SIZE_HEADER]);
  const it = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first: Buffer[] = [];
  let have = 0;
  let done = false;
  while (have < k.head) {
    const r = await it.next();
    if (r.done === true) {
      done = true;
      break;
    }
    first.push(r.value);
    have += r.value.length;
  }
  const head = Buffer.concat(first).subarray(0, k.head);
  async function* body() {
    try {
      yield* first;
      if (done) return;
      for (;;) {
        const r = await it.next();
        if (r.done === true) return;
        yield r.value;
      }
    } finally {
      if (!res.complete) res.destroy();
    }
  }
  return { size, head, body: body() };
}

async function* archive(
  client: StorageClient,
  kind: VcsKind,
  dir: string,
  a: { commit: string; format: string; prefix: string; nice: string },
  signal: AbortSignal | undefined,
): AsyncIterable<Buffer> {
  const { repo } = placed(dir);
  const path = `/internal/v1/archive?${query({ repo, kind, ...a })}`;
  const res = await ok(await client.request(dir, { method: 'GET', path, ...(signal ? { signal } : {}) }));
  try {
    for await (const chunk of res) yield chunk as Buffer;
  } finally {
    if (!res.complete) res.destroy();
  }
}

/**
 * A clone URL request served by the node's backend: the spooled body goes to the node, the
 * backend's status and headers come back onto the client's response, and its body streams to the
 * client (or into `output`, a push's held answer). The response is left open, as a local backend
 * run leaves it.
 */
async function serve(
  client: StorageClient,
  kind: VcsKind,
  b: BackendRequest,
  nice: number,
): Promise<CgiResult> {
  const { repo } = placed(b.repoPath);
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(b.req.headers))
    // (nor any x-triad-* header a client sent: the node trusts those as the server's word)
    if (v !== undefined && !UNFORWARDED.has(k) && !k.startsWith('x-triad-')) headers[k] = v;
  Object.assign(headers, {
    [BACKEND.repo]: repo,
    [BACKEND.kind]: kind,
    [BACKEND.uri]: headerText(b.req.url ?? '/'),
    [BACKEND.subpath]: headerText(b.subpath),
    [BACKEND.query]: headerText(b.query),
    [BACKEND.scriptName]: headerText(b.scriptName),
    [BACKEND.write]: b.write ? '1' : '0',
    [BACKEND.mutates]: b.output === undefined ? '0' : '1',
    [BACKEND.nice]: String(nice),
    ...(b.remoteUser === undefined ? {} : { [BACKEND.remoteUser]: headerText(b.remoteUser) }),
    ...(b.protection === undefined ? {} : { [BACKEND.protection]: protectionHeader(b.protection) }),
  });
  const input = b.input;
  if (input !== undefined) headers['content-length'] = String(input.size);
  const res = await client.request(b.repoPath, {
    method: b.req.method ?? 'GET',
    path: '/internal/v1/backend',
    headers,
    signal: b.signal,
    ...(input === undefined ? {} : { body: () => createReadStream(input.file) }),
  });
  const failed = res.headers[BACKEND.outcome];
  if (failed !== undefined) {
    const text = await readText(res);
    return { outcome: 'failed', code: null, stderr: text.slice(0, 8192) };
  }
  b.res.statusCode = res.statusCode ?? 502;
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower === 'connection' || lower === 'keep-alive' || lower === 'transfer-encoding' || lower === 'date')
      continue;
    if (lower.startsWith('x-triad-')) continue;
    b.res.appendHeader(name, res.rawHeaders[i + 1]!);
  }
  try {
    if (b.output !== undefined) await pipeline(res, createWriteStream(b.output, { mode: 0o600 }));
    else await pipeline(res, b.res, { end: false });
    if (!res.complete) throw new Error('the node cut the answer short');
    return { outcome: 'ok', code: 0, stderr: '' };
  } catch (e) {
    res.destroy();
    return {
      outcome: b.signal.aborted ? 'aborted' : 'failed',
      code: null,
      stderr: e instanceof Error ? e.message : String(e),
    };
  }
}
