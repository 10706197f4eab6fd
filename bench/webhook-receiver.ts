/**
 * The receiver of `bench/webhooks.ts`, run as its own process: answers every webhook with 204,
 * checks the `X-Svc-Signature-256` HMAC of the raw body (constant-time), and reports each
 * arrival `{seq, at}` (`at`: wall-clock milliseconds, comparable across processes) to its parent
 * in batches.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const secret = process.env.BENCH_SECRET ?? '';
let batch: { seq: number; at: number; valid: boolean }[] = [];
const flush = () => {
  if (batch.length > 0) process.send?.({ arrivals: batch });
  batch = [];
};
setInterval(flush, 20).unref();

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.timeOrigin + performance.now();
    const raw = Buffer.concat(chunks);
    const sig = String(req.headers['x-svc-signature-256'] ?? '').replace(/^sha256=/, '');
    const want = createHmac('sha256', secret).update(raw).digest();
    const got = Buffer.from(sig, 'hex');
    const valid = got.length === want.length && timingSafeEqual(got, want);
    const body = JSON.parse(raw.toString('utf8')) as { payload: { seq: number } };
    batch.push({ seq: body.payload.seq, at, valid });
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
process.on('disconnect', () => process.exit(0));
