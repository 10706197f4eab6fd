import { createWriteStream } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import { niced } from './priority.ts';
import { spawnChild } from './spawner.ts';

export type CgiRequest = {
  command: string;
  args: string[];
  cwd?: string;
  /** CGI meta-variables beyond the ones derived from the request. */
  env: Record<string, string>;
  req: IncomingMessage;
  res: ServerResponse;
  pathInfo: string;
  scriptName: string;
  /** QUERY_STRING as Triad understood it (re-encoded, so the backend cannot read it differently). */
  queryString: string;
  remoteUser?: string;
  /** The spooled request body (stdin), or none. */
  input?: { file: string; size: number };
  /**
   * Write the response body to this file instead of streaming it to the client. Used for pushes:
   * no client sees its push complete before Triad has recorded what the push changed.
   */
  output?: string;
  /** The backend's TMPDIR (a per-request directory Triad removes afterwards). */
  tmpDir: string;
  /** Aborts when the client leaves or the run's deadline passes: the process group is killed. */
  signal: AbortSignal;
  /** Niceness added to the backend's (priority.ts); 0 or absent: the server's own. */
  nice?: number;
};

/**
 * How a run ended: `ok` (the backend sent its header block and exited), `failed` (it exited
 * without one), `aborted` (stopped through the signal).
 */
export type CgiResult = { outcome: 'ok' | 'failed' | 'aborted'; code: number | null; stderr: string };

/** Seconds between SIGTERM and SIGKILL for a process group that is being stopped. */
const GRACE_MS = 2000;

/**
 * Every backend runs as the leader of its own process group, started (by the spawner) through
 * this shell line. It leaves a watcher in the group that reads fd 3, a pipe whose other end only
 * the spawner holds, then execs the backend (without fd 3). A line is written there when a run is
 * over: the watcher kills whatever is left in the group. When the spawner dies (it ends with its
 * server, and could itself be killed), the pipe closes: the watcher sends SIGTERM to the group,
 * then SIGKILL. So no backend, hook or helper process outlives the request or the server.
 */
export const LIFELINE = `(trap '' TERM; read line <&3 && kill -KILL 0; kill -TERM 0; sleep ${GRACE_MS / 1000}; kill -KILL 0) </dev/null >/dev/null 2>&1 & exec "$@" 3<&-`;

const HEADER_END = [Buffer.from('\r\n\r\n'), Buffer.from('\n\n')];
const SKIPPED_HEADERS = new Set([
  'authorization',
  'content-type',
  'content-length',
  'transfer-encoding',
  'proxy',
]);

/** What the CGI meta-variables of a request are made of. */
export type CgiEnvInput = Pick<
  CgiRequest,
  'req' | 'tmpDir' | 'queryString' | 'scriptName' | 'pathInfo' | 'remoteUser' | 'input' | 'env'
>;

/** The CGI meta-variables of a request (also the WSGI environ of the pooled workers, wsgi.ts). */
export function cgiEnv(c: CgiEnvInput): Record<string, string> {
  const { req } = c;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: 'C.UTF-8',
    TMPDIR: c.tmpDir,
    SQLITE_TMPDIR: c.tmpDir,
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    SERVER_SOFTWARE: 'triad',
    SERVER_NAME: 'localhost',
    SERVER_PORT: String(req.socket.localPort ?? 80),
    REQUEST_METHOD: req.method ?? 'GET',
    REQUEST_URI: req.url ?? '/',
    QUERY_STRING: c.queryString,
    SCRIPT_NAME: c.scriptName,
    PATH_INFO: c.pathInfo,
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    ...c.env,
  };
  if (c.input !== undefined) env.CONTENT_LENGTH = String(c.input.size);
  if (c.remoteUser !== undefined) {
    env.REMOTE_USER = c.remoteUser;
    env.AUTH_TYPE = 'Basic';
  }
  for (const [k, v] of Object.entries(req.headers)) {
    if (SKIPPED_HEADERS.has(k) || v === undefined) continue;
    env[`HTTP_${k.toUpperCase().replace(/-/g, '_')}`] = Array.isArray(v) ? v.join(', ') : v;
  }
  return env;
}

/**
 * Runs a CGI program for one request: the spooled body is its stdin, its header block becomes the
 * response status and headers, and the rest of stdout streams to the client (or to `output`).
 * Resolves when the program has exited and its output is closed. The response is left open: the
 * caller ends it (and answers errors), so it can first record what the request changed.
 */
export async function runCgi(c: CgiRequest): Promise<CgiResult> {
  const { res } = c;
  const [command, args] = niced(c.nice ?? 0, c.command, c.args);
  // stdin the spooled body (opened by the spawner), fd 3 the lifeline (held by the spawner)
  const child = await spawnChild('/bin/sh', ['-c', LIFELINE, 'triad-backend', command, ...args], {
    env: cgiEnv(c),
    cwd: c.cwd,
    stdio: [c.input === undefined ? 'ignore' : { file: c.input.file }, 'pipe', 'collect', 'hold'],
  });
  // No await from here until every listener is attached: a fast backend could exit (and its
  // 'exit' event be lost) while this function waited.
  const stdout = child.stdout;
  if (stdout === null) throw new Error('backend started without an output pipe');
  const lifeline = (text: string) => child.write(3, text, true);
  const sink: Writable = c.output === undefined ? res : createWriteStream(c.output, { mode: 0o600 });
  sink.on('error', () => undefined);

  let aborted = false;
  let garbled = false;
  let outputEnded = false;
  // the body's length the backend announced, and how much of it went out
  let announced: number | undefined;
  let sent = 0;
  let leftAfterAnswer = false;
  let killTimer: NodeJS.Timeout | undefined;
  const killLater = () => {
    killTimer = setTimeout(() => {
      child.kill('SIGKILL');
      lifeline('');
    }, GRACE_MS);
  };
  const abort = () => {
    if (aborted) return;
    aborted = true;
    const delivered = sink !== res || res.writableLength === 0;
    if (delivered && (outputEnded || (announced !== undefined && sent >= announced))) {
      // The client left after the whole answer (a Fossil client closes once it has the
      // Content-Length it was told): the backend is given the grace to exit by itself.
      leftAfterAnswer = true;
      killLater();
      return;
    }
    stdout.destroy();
    child.kill('SIGTERM');
    killLater();
  };

  return new Promise<CgiResult>((resolve) => {
    let head = Buffer.alloc(0);
    let headersDone = false;
    const write = (chunk: Buffer) => {
      sent += chunk.length;
      if (!sink.write(chunk)) {
        stdout.pause();
        sink.once('drain', () => stdout.resume());
      }
    };
    const finishHeaders = (block: string) => {
      let status = 200;
      for (const line of block.split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i <= 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 200;
        else res.appendHeader(name, value);
        if (name.toLowerCase() === 'content-length' && /^\d+$/.test(value)) announced = Number(value);
      }
      res.statusCode = status;
      headersDone = true;
    };
    stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      for (const sep of HEADER_END) {
        const at = head.indexOf(sep);
        if (at >= 0) {
          finishHeaders(head.subarray(0, at).toString('latin1'));
          const rest = head.subarray(at + sep.length);
          if (rest.length > 0) write(rest);
          head = Buffer.alloc(0);
          return;
        }
      }
      if (head.length > 64 * 1024) {
        garbled = true; // no header block: not a CGI answer
        abort();
      }
    });
    if (c.signal.aborted) abort();
    else c.signal.addEventListener('abort', abort, { once: true });
    // Done when the leader has exited and its output is closed (its stderr comes with the exit;
    // the lifeline stays open until the run is declared over).
    let waiting = 2;
    const settle = () => {
      waiting -= 1;
      if (waiting > 0) return;
      c.signal.removeEventListener('abort', abort);
      clearTimeout(killTimer);
      // the run is over: the watcher ends anything still in the group, then itself
      lifeline('done\n');
      const result: CgiResult = {
        outcome: garbled ? 'failed' : aborted && !leftAfterAnswer ? 'aborted' : headersDone ? 'ok' : 'failed',
        code: child.exitCode,
        stderr: child.stderr.slice(0, 8192).trim(),
      };
      if (sink === res) resolve(result);
      else sink.end(() => resolve(result));
    };
    void child.exited.then(settle);
    stdout.once('end', () => (outputEnded = true));
    if (stdout.destroyed) settle();
    else stdout.once('close', settle);
  });
}
