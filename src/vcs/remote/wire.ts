/**
 * The storage nodes' internal protocol, shared by the node (src/storage-node/server.ts) and the
 * servers' remote driver (client.ts, vcs.ts): the `VcsDriver` contract over HTTP. Private to
 * Triad and versioned by a header, so a server and a node of different versions refuse each other
 * with a clear message during an upgrade instead of misreading each other.
 *
 * Calls that answer values are JSON: `POST /internal/v1/call` with `{repo, kind, target, method,
 * args}` answers `{result}` or `{error}`. Values are JSON with three tagged forms JSON lacks
 * (`encode`/`decode`): maps, bytes and `undefined`. Streams stay streams: clone URL requests
 * (`/internal/v1/backend`), file bytes (`/cat`), archives (`/archive`) and a repository's copy
 * for a move (`/export`) are plain HTTP bodies.
 */
import { ReadNotFound, BadPath, type NotFoundKind } from '../reader.ts';
import { InvalidRefName, RefNotFound } from '../ops.ts';
import { VcsCommandFailed } from '../process/run.ts';
import type { Protection } from '../../protection/rules.ts';

/** Bumped whenever a request or answer changes shape. */
export const PROTOCOL_VERSION = '1';
export const VERSION_HEADER = 'x-triad-storage-protocol';
/** The answer of a node that does not hold the repository (it moved): the caller asks the database again. */
export const NOT_HERE_HEADER = 'x-triad-not-here';
/** The size of the file a `/cat` answer streams. */
export const SIZE_HEADER = 'x-triad-size';

/** A repository's name on a node: `<id>.<kind>` (the file or directory under the node's root). */
export const REPO_NAME = /^(\d{1,15})\.(git|hg|fossil)$/;

/** What a `/call` may reach: the driver's, the operations' and the reader's calls that name a repository. */
export const CALLS = {
  driver: ['init', 'recover', 'snapshot', 'moves', 'filesAt', 'arrivals', 'prepare', 'remove'],
  ops: [
    'resolveRef',
    'resolveRefs',
    'resolveCommit',
    'checkMerge',
    'merge',
    'deleteRef',
    'createTag',
    'isAncestor',
  ],
  reader: ['resolve', 'resolveThen', 'tree', 'blob', 'file', 'log', 'refs', 'changeset', 'compare', 'revs'],
} as const;
export type CallTarget = keyof typeof CALLS;

/**
 * Calls that change the repository (or must not see a change half applied): the node runs them
 * under its own lock of the repository, which a mutating backend run also holds, and invalidates
 * its readers afterwards; the changing ones are then backed up before they answer.
 */
export const LOCKED_CALLS = new Set([
  'init',
  'recover',
  'snapshot',
  'merge',
  'deleteRef',
  'createTag',
  'remove',
]);
/** (`init` too: an empty repository's backup says so, and restores as empty.) */
export const CHANGING_CALLS = new Set(['init', 'merge', 'deleteRef', 'createTag']);

export type CallRequest = { repo: string; kind: string; target: CallTarget; method: string; args: unknown[] };

// ------------------------------------------------------------------ values

/** A JSON-able copy of `v` with maps, bytes and `undefined` tagged (`decode` reverses it). */
export function encode(v: unknown): unknown {
  if (v === undefined) return { $u: 1 };
  if (v === null || typeof v !== 'object') return v;
  if (Buffer.isBuffer(v)) return { $b: v.toString('base64') };
  if (v instanceof Map) return { $m: [...v].map(([k, x]) => [encode(k), encode(x)]) };
  if (Array.isArray(v)) return v.map(encode);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = encode(x);
  return out;
}

export function decode(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  const o = v as Record<string, unknown>;
  if ('$u' in o) return undefined;
  if (typeof o.$b === 'string') return Buffer.from(o.$b, 'base64');
  if (Array.isArray(o.$m))
    return new Map((o.$m as [unknown, unknown][]).map(([k, x]) => [decode(k), decode(x)]));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(o)) out[k] = decode(x);
  return out;
}

// ------------------------------------------------------------------ errors

/** An error as it crosses the wire: the contract's own errors keep their class and fields. */
export type WireError = {
  type: 'read_not_found' | 'bad_path' | 'ref_not_found' | 'invalid_ref_name' | 'command_failed' | 'error';
  message: string;
  kind?: string;
  role?: string;
  ref?: string;
  code?: number | null;
  stderr?: string;
};

export function errorToWire(e: unknown): WireError {
  if (e instanceof ReadNotFound) return { type: 'read_not_found', message: e.message, kind: e.kind };
  if (e instanceof BadPath) return { type: 'bad_path', message: e.message };
  if (e instanceof RefNotFound)
    return { type: 'ref_not_found', message: e.message, role: e.role, ref: e.ref };
  if (e instanceof InvalidRefName) return { type: 'invalid_ref_name', message: e.message };
  if (e instanceof VcsCommandFailed)
    return { type: 'command_failed', message: e.message, code: e.code, stderr: e.stderr.slice(0, 4096) };
  return { type: 'error', message: e instanceof Error ? e.message : String(e) };
}

export function errorFromWire(w: WireError): Error {
  switch (w.type) {
    case 'read_not_found':
      return new ReadNotFound(w.kind as NotFoundKind, w.message);
    case 'bad_path':
      return new BadPath(w.message);
    case 'ref_not_found':
      return new RefNotFound(w.role === 'target' ? 'target' : 'source', w.ref ?? '');
    case 'invalid_ref_name':
      return new InvalidRefName(w.message);
    case 'command_failed':
      return new VcsCommandFailed(w.message, w.code ?? null, w.stderr ?? '');
    case 'error':
      return new Error(w.message);
  }
}

// ------------------------------------------------------------------ backend requests

/** Headers a clone URL request carries to the node beside the client's own. */
export const BACKEND = {
  repo: 'x-triad-repo',
  kind: 'x-triad-kind',
  uri: 'x-triad-uri',
  subpath: 'x-triad-subpath',
  query: 'x-triad-query',
  scriptName: 'x-triad-script-name',
  remoteUser: 'x-triad-remote-user',
  write: 'x-triad-write',
  /** A push to a repository with protection rules: `Protection` as base64url JSON (rules.ts). */
  protection: 'x-triad-protection',
  /** The run changes the repository: the node locks it, holds the answer and backs up first. */
  mutates: 'x-triad-mutates',
  nice: 'x-triad-nice',
  /** Set by the node on a 502 it answers itself: the backend failed before its header block. */
  outcome: 'x-triad-outcome',
} as const;

/** Client headers never forwarded to a node (hop-by-hop, credentials, framing). */
export const UNFORWARDED = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'authorization',
  'cookie',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

/** `Protection` in a header (`BACKEND.protection`): base64url JSON, shorter than URI-encoded JSON. */
export const protectionHeader = (p: Protection): string =>
  Buffer.from(JSON.stringify(p)).toString('base64url');
export const fromProtectionHeader = (h: string | string[] | undefined): Protection | undefined =>
  typeof h === 'string'
    ? (JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as Protection)
    : undefined;

/** A header value's text as sent (names and paths may hold any character). */
export const headerText = (s: string): string => encodeURIComponent(s);
export const fromHeaderText = (s: string | string[] | undefined): string | undefined =>
  typeof s === 'string' ? decodeURIComponent(s) : undefined;
