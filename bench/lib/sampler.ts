/**
 * An API latency sampler that runs in a process of its own, so a stalled or CPU-starved server
 * cannot delay its timer: it starts a GET of `url` every `interval` ms, each on a new connection
 * (no keep-alive: a request never waits behind another) with a client timeout, until its stdin
 * closes; then it waits for the requests in flight and prints one JSON line: per request, when it
 * was started (ms after the first) and how long it took, and its status (0: timeout or network
 * error). The timer's own lateness is reported too (how late each tick fired).
 *
 *   node bench/lib/sampler.ts URL INTERVAL_MS TIMEOUT_MS
 */
import http from 'node:http';

/** `id`: the request's X-Request-Id; `start`: when it was started (ms since the epoch). */
export type Sample = { id: string; start: number; at: number; ms: number; status: number };
export type SamplerResult = { samples: Sample[]; tickLateMaxMs: number };

const [url = '', intervalArg = '50', timeoutArg = '60000'] = process.argv.slice(2);
const interval = Number(intervalArg);
const timeout = Number(timeoutArg);
const samples: Sample[] = [];
const inflight = new Set<Promise<void>>();
const t0 = performance.now();
let tickLateMaxMs = 0;

let seq = 0;
function once(): Promise<void> {
  const start = performance.now();
  const id = `sample-${++seq}`;
  return new Promise<void>((resolve) => {
    let done = false;
    const finish = (status: number) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      samples.push({
        id,
        start: performance.timeOrigin + start,
        at: start - t0,
        ms: performance.now() - start,
        status,
      });
      resolve();
    };
    const req = http.get(url, { agent: false, headers: { 'x-request-id': id } }, (res) => {
      res.resume();
      res.on('end', () => finish(res.statusCode ?? 0));
      res.on('error', () => finish(0));
    });
    req.on('error', () => finish(0));
    const timer = setTimeout(() => {
      finish(0);
      req.destroy();
    }, timeout);
  });
}

let next = performance.now();
let stopped = false;
const tick = () => {
  if (stopped) return;
  const now = performance.now();
  tickLateMaxMs = Math.max(tickLateMaxMs, now - next);
  const p = once().finally(() => inflight.delete(p));
  inflight.add(p);
  next += interval;
  setTimeout(tick, Math.max(0, next - performance.now()));
};
tick();

process.stdin.resume();
process.stdin.on('end', () => {
  stopped = true;
  void Promise.all(inflight).then(() => {
    const result: SamplerResult = { samples, tickLateMaxMs };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  });
});
