import type { IncomingMessage, ServerResponse } from 'node:http';
import { runCgi, type CgiRequest, type CgiResult } from './cgi.ts';
import type { VcsDriver } from './driver.ts';

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
  /** The CGI program for one request (may prepare the repository or a script first). */
  backend(b: BackendRequest): Promise<CgiProgram>;
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

/** Serves one request with the kind's own HTTP backend (git http-backend, hgweb, fossil CGI). */
export async function serveBackend(driver: VcsDriver, b: BackendRequest): Promise<CgiResult> {
  return runCgi({
    req: b.req,
    res: b.res,
    scriptName: b.scriptName,
    queryString: b.query,
    remoteUser: b.remoteUser,
    input: b.input,
    tmpDir: b.tmpDir,
    signal: b.signal,
    ...(b.output === undefined ? {} : { output: b.output }),
    ...(await driver.transport.backend(b)),
  });
}
