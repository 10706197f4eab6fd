import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { sleep } from './wait.ts';

export type Proc = { pid: number; cmdline: string };

/**
 * Processes whose environment holds `needle` (for example `SCRIPT_NAME=/org/`, which every
 * repository backend Triad starts for that organization inherits, children and orphans included).
 */
export async function processesWithEnv(needle: string): Promise<Proc[]> {
  const found: Proc[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const environ = await fs.readFile(`/proc/${entry}/environ`).catch(() => undefined);
    if (environ === undefined) continue;
    if (
      !environ
        .toString('latin1')
        .split('\0')
        .some((v) => v.startsWith(needle))
    )
      continue;
    const cmdline = await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline === '') continue; // a zombie or already gone
    found.push({ pid: Number(entry), cmdline: cmdline.split('\0').join(' ').trim() });
  }
  return found;
}

/** Polls until no process carries `needle` in its environment; returns what is left at the deadline. */
export async function waitNoProcesses(needle: string, limitMs = 15_000): Promise<Proc[]> {
  const until = Date.now() + limitMs;
  for (;;) {
    const left = await processesWithEnv(needle);
    if (left.length === 0 || Date.now() > until) return left;
    await sleep(100);
  }
}

/** Kills (SIGKILL) processes left by a test, so one failure does not leak into the next tests. */
export async function killProcessesWithEnv(needle: string): Promise<void> {
  for (const p of await processesWithEnv(needle)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

export type RawResponse = { status: number; head: string; body: Buffer };

/**
 * Sends one HTTP/1.1 request over a raw socket: the head, then `body`. With `abortAfterMs` the
 * socket is destroyed that long after the body was written (a client that goes away mid-transfer);
 * with `readBytes` it is destroyed once that much of the response arrived.
 */
export function rawRequest(
  base: string,
  opts: {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: Buffer | string;
    abortAfterMs?: number;
    readBytes?: number;
  },
): Promise<RawResponse | undefined> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    let got = 0;
    let settled = false;
    const finish = (r: RawResponse | undefined) => {
      if (settled) return;
      settled = true;
      sock.destroy();
      resolve(r);
    };
    sock.on('error', (e) =>
      settled ? undefined : opts.abortAfterMs === undefined ? reject(e) : finish(undefined),
    );
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      got += d.length;
      if (opts.readBytes !== undefined && got >= opts.readBytes) finish(undefined);
    });
    sock.on('end', () => finish(parse(Buffer.concat(chunks))));
    sock.on('close', () => finish(chunks.length === 0 ? undefined : parse(Buffer.concat(chunks))));
    sock.on('connect', () => {
      const headers = { host: u.host, connection: 'close', ...opts.headers };
      const head = `${opts.method} ${opts.path} HTTP/1.1\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`;
      sock.write(head);
      if (opts.body !== undefined) sock.write(opts.body);
      if (opts.abortAfterMs !== undefined) setTimeout(() => finish(undefined), opts.abortAfterMs);
    });
  });
}

function parse(buf: Buffer): RawResponse {
  const at = buf.indexOf('\r\n\r\n');
  const head = buf.toString('latin1', 0, at < 0 ? buf.length : at);
  const status = Number(/^HTTP\/1\.\d (\d{3})/.exec(head)?.[1] ?? 0);
  return { status, head, body: at < 0 ? Buffer.alloc(0) : buf.subarray(at + 4) };
}

export function basic(token: string): string {
  return `Basic ${Buffer.from(`x:${token}`).toString('base64')}`;
}

/** Every regular file under `dir` (recursively); directories themselves are not listed. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out.push(p);
    }
  };
  await walk(dir);
  return out;
}

/**
 * Files under a spool directory (other than the CGI scripts, kept for the process's lifetime),
 * once the last request's clean-up had a moment to finish.
 */
export async function noFilesUnder(dir: string): Promise<string[]> {
  const until = Date.now() + 5000;
  for (;;) {
    const files = (await filesUnder(dir)).filter((f) => !f.includes('/scripts/'));
    if (files.length === 0 || Date.now() > until) return files;
    await sleep(100);
  }
}
