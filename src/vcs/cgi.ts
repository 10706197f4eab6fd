import { spawn } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';

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
  remoteUser?: string;
  /**
   * Hold the response body in memory instead of streaming it; the caller sends it with
   * `res.end(body)`. Used for pushes, so that no client sees its push complete (and, say,
   * `hg push` exit) before Triad has recorded what the push changed.
   */
  buffer?: boolean;
};

export type CgiResult = { code: number; body: Buffer };

const HEADER_END = [Buffer.from('\r\n\r\n'), Buffer.from('\n\n')];

/**
 * Runs a CGI program for one request: the request body streams to its stdin, its header block
 * becomes the response status and headers, and the rest of stdout streams to the client.
 * Resolves with the program's exit code when the program has exited. The response is left
 * open (unless the program failed before sending headers): the caller ends it, so it can first
 * record what the request changed.
 */
export function runCgi(c: CgiRequest): Promise<CgiResult> {
  const { req, res } = c;
  const url = new URL(req.url ?? '/', 'http://localhost');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: 'C.UTF-8',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    SERVER_SOFTWARE: 'triad',
    SERVER_NAME: 'localhost',
    SERVER_PORT: String(req.socket.localPort ?? 80),
    REQUEST_METHOD: req.method ?? 'GET',
    REQUEST_URI: req.url ?? '/',
    QUERY_STRING: url.search.replace(/^\?/, ''),
    SCRIPT_NAME: c.scriptName,
    PATH_INFO: c.pathInfo,
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    ...c.env,
  };
  if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = req.headers['content-length'];
  if (c.remoteUser !== undefined) {
    env.REMOTE_USER = c.remoteUser;
    env.AUTH_TYPE = 'Basic';
  }
  for (const [k, v] of Object.entries(req.headers)) {
    if (k === 'authorization' || k === 'content-type' || k === 'content-length' || v === undefined) continue;
    env[`HTTP_${k.toUpperCase().replace(/-/g, '_')}`] = Array.isArray(v) ? v.join(', ') : v;
  }
  const child = spawn(c.command, c.args, { env, cwd: c.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  req.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    if (stderr.length < 8192) stderr += d.toString();
  });

  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    let headersDone = false;
    const held: Buffer[] = [];
    const write = (chunk: Buffer) => {
      if (c.buffer === true) {
        held.push(chunk);
        return;
      }
      if (!res.write(chunk)) {
        child.stdout.pause();
        res.once('drain', () => child.stdout.resume());
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
      }
      res.statusCode = status;
      headersDone = true;
    };
    child.stdout.on('data', (chunk: Buffer) => {
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
    });
    // A client that goes away must not leave the backend blocked on a full pipe.
    res.on('close', () => {
      if (!res.writableFinished && child.exitCode === null) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (!headersDone) {
        if (!res.headersSent) {
          res.statusCode = 502;
          res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        }
        res.end(`repository backend failed${stderr === '' ? '' : `: ${stderr.trim().slice(0, 500)}`}\n`);
      }
      resolve({ code: code ?? 1, body: Buffer.concat(held) });
    });
  });
}
