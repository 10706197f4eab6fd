import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runCgi, type CgiResult } from '../../src/vcs/process/cgi.ts';
import { tempDir } from '../helpers/vcs.ts';

// runCgi's outcome when the client goes away: before the answer is whole, the run is aborted and
// the backend's group stopped; after it (a client that closes once it has the Content-Length it
// was told, as Fossil's does), the backend is let finish and the run is a success.
let tmp: string;
let server: http.Server;
let script = '';
let last: Promise<CgiResult> = Promise.resolve({ outcome: 'failed', code: null, stderr: '' });
beforeAll(async () => {
  tmp = await tempDir('triad-cgi-');
  server = http.createServer((req, res) => {
    const ac = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) ac.abort();
    });
    last = runCgi({
      command: '/bin/sh',
      args: ['-c', script],
      env: {},
      req,
      res,
      pathInfo: '',
      scriptName: '/x',
      queryString: '',
      tmpDir: tmp,
      signal: ac.signal,
    });
    void last.then(() => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await fs.rm(tmp, { recursive: true, force: true });
});

/** Reads the body's `length` bytes, then closes the connection (at once, or after `wait` ms). */
function readAndLeave(length: number, wait = 0): Promise<string> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const req = http.get({ port, host: '127.0.0.1', path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
        if (body.length >= length) {
          setTimeout(() => {
            req.destroy();
            resolve(body);
          }, wait);
        }
      });
    });
    req.on('error', (e) => {
      if ((e as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(e);
    });
  });
}

describe('runCgi when the client leaves', () => {
  test.each([
    [
      'its announced length was sent (the output still open)',
      `Content-Length: 5\\r\\n\\r\\nhello'; sleep 0.5`,
      0,
    ],
    // (the client waits a moment: the server must have seen the output end before it leaves)
    ['its output ended (no length announced)', `\\r\\nhello'; exec >&-; sleep 0.5`, 200],
  ])(
    'after the whole answer (%s), then the backend finishes on its own and the run is a success',
    async (_, rest, wait) => {
      script = `printf 'Content-Type: text/plain\\r\\n${rest}; exit 0`;
      expect(await readAndLeave(5, wait)).toBe('hello');
      expect(await last).toEqual({ outcome: 'ok', code: 0, stderr: '' });
    },
  );

  test('before the answer is whole, then the run is aborted and the backend stopped', async () => {
    script = `printf 'Content-Type: text/plain\\r\\nContent-Length: 10\\r\\n\\r\\nhello'; sleep 30; printf world`;
    expect(await readAndLeave(5)).toBe('hello');
    const r = await last;
    expect(r.outcome).toBe('aborted');
    expect(r.code).toBeNull(); // killed by the signal
  });
});
