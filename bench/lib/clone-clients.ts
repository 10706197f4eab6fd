/**
 * The clone clients of bench/clone-flood.ts, in a process of their own: started in a session of
 * its own (`detached`), it launches `COUNT` `hg clone -U` of `URL` at once into `DIR/c<i>`, each
 * under `nice -n NICE`, and prints one JSON line with how each ended. With NICE > 0 it first gives
 * its session's scheduling group the same niceness (`/proc/self/autogroup`, where the kernel
 * groups processes by session): the clients together then weigh like one low-priority process
 * against the server's session, roughly as if they ran on other machines. Without that, 200
 * processes at niceness 19 in the server's own session outweigh the server.
 *
 *   node bench/lib/clone-clients.ts URL DIR COUNT NICE
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ENV } from '../repos.ts';

export type CloneOutcome = { ok: boolean; refused: boolean; seconds: number; err: string };

const [url = '', dir = '', countArg = '200', niceArg = '19'] = process.argv.slice(2);
const nice = Number(niceArg);
if (nice > 0) {
  try {
    fs.writeFileSync('/proc/self/autogroup', String(nice));
  } catch {
    // no autogroups here (or not allowed): the niceness of each client still applies
  }
}
const HG = '/usr/bin/hg';
const [cmd, pre] = nice > 0 ? ['nice', ['-n', String(nice), HG]] : [HG, []];
const outcomes = await Promise.all(
  Array.from(
    { length: Number(countArg) },
    (_, i) =>
      new Promise<CloneOutcome>((resolve) => {
        const t = performance.now();
        const child = spawn(cmd, [...pre, 'clone', '-U', '-q', url, path.join(dir, `c${i}`)], {
          env: ENV,
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let err = '';
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.on('close', (code) =>
          resolve({
            ok: code === 0,
            refused: /\b503\b/.test(err),
            seconds: (performance.now() - t) / 1000,
            err: err.trim().split('\n').pop() ?? '',
          }),
        );
      }),
  ),
);
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
