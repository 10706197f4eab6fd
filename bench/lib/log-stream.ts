/**
 * The step log contract of the web interface (issue 30), served over loopback for the log
 * viewer's browser test and benchmark until the real Triad routes take their place:
 *
 * - `GET /log`: a page with `<section class="log-viewer" data-live data-raw data-size
 *   data-status>` holding the fallback (the last lines, a download link), the stylesheet and
 *   the `log-viewer` island from src/web/assets.ts, under the app's own CSP header.
 * - `GET /log/raw`: the whole log, `text/plain; charset=utf-8`, with `Range: bytes=a-b` (206).
 * - `GET /log/live?tail=BYTES | ?offset=K` (the `Last-Event-ID` header wins): server-sent events
 *   `begin` {offset, size}, `log` (id: the byte after the chunk; data: the chunk as a JSON
 *   string, cut at UTF-8 character boundaries), `: hb` every 15 s, and `done` {status,
 *   exit_code, size}, after which the stream is closed.
 * - `GET /naive`: the same log drawn naively (one `<div>` per line), for the benchmark's comparison.
 *
 * `LogSource` is the growing log; `feed` appends synthetic lines at a rate; `dropStreams` cuts
 * every live stream (a server restart) and `liveRequests` records how each was opened.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { assets } from '../../src/web/assets.ts';
import { CSP } from '../../src/web/web.ts';
import { NAIVE_SCRIPT } from './naive-log.ts';

export class LogSource {
  private buf = Buffer.alloc(1 << 20);
  size = 0;
  done = false;
  status = 'running';
  exitCode: number | null = null;
  private readonly listeners = new Set<() => void>();

  append(text: string): void {
    const bytes = Buffer.from(text);
    if (this.size + bytes.length > this.buf.length) {
      const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.size + bytes.length));
      this.buf.copy(bigger, 0, 0, this.size);
      this.buf = bigger;
    }
    bytes.copy(this.buf, this.size);
    this.size += bytes.length;
    this.changed();
  }

  finish(status = 'success', exitCode: number | null = 0): void {
    this.done = true;
    this.status = status;
    this.exitCode = exitCode;
    this.changed();
  }

  bytes(from = 0, to = this.size): Buffer {
    return this.buf.subarray(from, to);
  }

  text(): string {
    return this.bytes().toString('utf8');
  }

  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of [...this.listeners]) fn();
  }
}

const esc = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(source: LogSource, naive: boolean): string {
  const a = assets();
  const script = naive ? '/naive.js' : a.url('log-viewer.js');
  const end = source.bytes(Math.max(0, source.size - 8192)).toString('utf8');
  const last = end.split('\n').slice(-50).join('\n');
  // eslint-disable-next-line no-control-regex
  const fallback = last.replace(/\x1b\[[0-9;:]*[A-Za-z]|\r/g, '');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Step log · Triad</title>
<link rel="stylesheet" href="${a.url('triad.css')}">
<link rel="icon" type="image/svg+xml" href="${a.url('icon.svg')}">
<script type="module" src="${script}"></script>
</head>
<body>
<main id="main" class="wide">
<h1>Step log</h1>
<section class="log-viewer" data-live="/log/live" data-raw="/log/raw" data-size="${source.size}" data-status="${source.status}">
<pre>${esc(fallback)}</pre>
<p><a href="/log/raw">Download raw log</a></p>
</section>
</main>
</body>
</html>
`;
}

export type LogServer = {
  url: string;
  source: LogSource;
  /** How each live stream was asked for: its query and Last-Event-ID. */
  liveRequests: Array<{ query: string; lastEventId: string | undefined }>;
  /** Cuts every live stream (as a server restart would). */
  dropStreams(): void;
  close(): Promise<void>;
};

/** UTF-8: the last character boundary at or before `end` (not before `from`). */
function boundary(buf: Buffer, from: number, end: number, size: number): number {
  let e = end;
  while (e > from && e < size && (buf[e]! & 0xc0) === 0x80) e--;
  return e === from ? end : e;
}

export async function startLogServer(
  source: LogSource,
  opts: { chunkBytes?: number; heartbeatMs?: number } = {},
): Promise<LogServer> {
  const chunkBytes = opts.chunkBytes ?? 64 * 1024;
  const live = new Set<Socket>();
  const liveRequests: LogServer['liveRequests'] = [];

  const stream = (req: http.IncomingMessage, res: http.ServerResponse, q: URLSearchParams) => {
    const lastId = req.headers['last-event-id'];
    liveRequests.push({ query: q.toString(), lastEventId: typeof lastId === 'string' ? lastId : undefined });
    const size = source.size;
    let pos: number;
    if (typeof lastId === 'string' && /^\d+$/.test(lastId)) pos = Math.min(Number(lastId), size);
    else if (q.has('offset')) pos = Math.min(Number(q.get('offset')), size);
    else {
      pos = Math.max(0, size - Number(q.get('tail') ?? size));
      if (pos > 0 && source.bytes()[pos - 1] !== 10) {
        const nl = source.bytes().indexOf(10, pos);
        pos = nl < 0 ? size : nl + 1;
      }
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    res.write(`event: begin\ndata: ${JSON.stringify({ offset: pos, size })}\n\n`);
    live.add(res.socket!);
    let busy = false;
    let ended = false;
    const pump = async () => {
      if (busy || ended) return;
      busy = true;
      while (pos < source.size && !ended) {
        const end = boundary(source.bytes(), pos, Math.min(source.size, pos + chunkBytes), source.size);
        const text = source.bytes(pos, end).toString('utf8');
        pos = end;
        if (!res.write(`event: log\nid: ${end}\ndata: ${JSON.stringify(text)}\n\n`))
          await new Promise((r) => res.once('drain', r));
      }
      if (source.done && pos >= source.size && !ended) {
        const d = { status: source.status, exit_code: source.exitCode, size: source.size };
        res.end(`event: done\ndata: ${JSON.stringify(d)}\n\n`);
        stop();
      }
      busy = false;
      if (pos < source.size && !ended) void pump();
    };
    const off = source.onChange(() => void pump());
    const hb = setInterval(() => res.write(': hb\n\n'), opts.heartbeatMs ?? 15_000);
    const stop = () => {
      ended = true;
      off();
      clearInterval(hb);
      live.delete(res.socket!);
    };
    res.on('close', stop);
    void pump();
  };

  const raw = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const size = source.size;
    const headers = {
      'Content-Type': 'text/plain; charset=utf-8',
      'Accept-Ranges': 'bytes',
      'Content-Security-Policy': "default-src 'none'; sandbox",
    };
    const m = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
    if (m === null || (m[1] === '' && m[2] === '')) {
      res.writeHead(200, { ...headers, 'Content-Length': size });
      res.end(source.bytes(0, size));
      return;
    }
    const a = m[1] === '' ? Math.max(0, size - Number(m[2])) : Number(m[1]);
    const b = m[1] === '' || m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (a >= size || a > b) {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` });
      res.end();
      return;
    }
    res.writeHead(206, {
      ...headers,
      'Content-Range': `bytes ${a}-${b}/${size}`,
      'Content-Length': b - a + 1,
    });
    res.end(source.bytes(a, b + 1));
  };

  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'same-origin');
    if (u.pathname === '/log' || u.pathname === '/naive') {
      res.setHeader('Content-Security-Policy', CSP);
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(page(source, u.pathname === '/naive'));
    } else if (u.pathname === '/log/raw') raw(req, res);
    else if (u.pathname === '/log/live') stream(req, res, u.searchParams);
    else if (u.pathname === '/naive.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8' });
      res.end(NAIVE_SCRIPT);
    } else if (u.pathname.startsWith('/-/assets/')) {
      const asset = assets().get(u.pathname.slice('/-/assets/'.length));
      if (asset === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, {
        'Content-Type': asset.type,
        'Cache-Control': 'public, max-age=31536000, immutable',
      });
      res.end(asset.body);
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    source,
    liveRequests,
    dropStreams: () => {
      for (const s of [...live]) s.destroy();
      live.clear();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * A synthetic CI log line `i` (about 95 bytes with its newline): timestamps and paths, ANSI
 * colours (16, 256 and 24-bit, bold, italic, underline) on some lines, a `\r` progress line now
 * and then, non-ASCII text, GitLab sections every `sectionEvery` lines and a five-line GitHub
 * group every 1,000.
 */
export function syntheticLine(i: number, sectionEvery = 10_000): string {
  const k = Math.floor(i / sectionEvery);
  const ts = `2026-11-30T12:${String(Math.floor(i / 60000) % 60).padStart(2, '0')}:${String(Math.floor(i / 1000) % 60).padStart(2, '0')}.${String(i % 1000).padStart(3, '0')}Z`;
  if (i % sectionEvery === 0)
    return `\x1b[0Ksection_start:1764504000:step_${k}\r\x1b[0K\x1b[36;1mStep ${k}: build and test\x1b[0m`;
  if (i % sectionEvery === sectionEvery - 1) return `\x1b[0Ksection_end:1764504000:step_${k}\r\x1b[0K`;
  if (i % 1000 === 500) return `::group::Details of batch ${i}`;
  if (i % 1000 === 505) return '::endgroup::';
  const base = `${ts} [build] compiling src/pkg${i % 97}/module${i % 13}.ts (line ${i})`;
  const pad = (s: string, visible: number) => s + ' '.repeat(Math.max(0, 94 - visible));
  if (i % 7 === 0) return pad(`${base} \x1b[32mok\x1b[0m`, base.length + 3);
  if (i % 11 === 0) return pad(`${base} \x1b[1;31mwarn\x1b[0m`, base.length + 5);
  if (i % 13 === 0) return pad(`${base} \x1b[38;5;214mcached\x1b[0m`, base.length + 7);
  if (i % 17 === 0) return pad(`${base} \x1b[38;2;121;192;255m\x1b[3mtrue\x1b[0m`, base.length + 5);
  if (i % 19 === 0) return pad(`${base} \x1b[4mnote\x1b[24m`, base.length + 5);
  if (i % 23 === 0) return `${ts} fetching 10%\r${ts} fetching 55%\r${ts} fetching 100% (line ${i})`;
  if (i % 29 === 0) return pad(`${base} é 日本 ✓`, base.length + 9);
  return pad(base, base.length);
}

/**
 * Appends lines `syntheticLine(i)` for i in [from, to) at `perSecond`, every `tickMs`; answers
 * a promise of the end (and `stop`).
 */
export function feed(
  source: LogSource,
  opts: { from?: number; to: number; perSecond: number; tickMs?: number; line?: (i: number) => string },
): { done: Promise<void>; stop: () => void } {
  const line = opts.line ?? ((i: number) => syntheticLine(i));
  const from = opts.from ?? 0;
  let next = from;
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(opts.to, from + Math.floor(((performance.now() - t0) * opts.perSecond) / 1000));
      if (due > next) {
        const parts: string[] = [];
        for (; next < due; next++) parts.push(line(next), '\n');
        source.append(parts.join(''));
      }
      if (next >= opts.to) resolve();
      else timer = setTimeout(tick, opts.tickMs ?? 10);
    };
    tick();
  });
  return { done, stop: () => clearTimeout(timer) };
}
