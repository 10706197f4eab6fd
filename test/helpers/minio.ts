/**
 * A MinIO server on loopback for tests: its own temporary data directory, a random port and
 * random root credentials. The binary is built by `npm run tools` (scripts/tools/build.ts).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'minio';
import { requireTools, toolPath } from '../../scripts/tools/tools.ts';

export type MinioServer = {
  /** http://127.0.0.1:PORT */
  url: string;
  host: string;
  port: number;
  accessKey: string;
  secretKey: string;
  region: string;
  /** A client of the npm `minio` package for this server. */
  client: () => Client;
  /** Stops the server and removes its data. */
  stop: () => Promise<void>;
  /** Stops the server process only (its data stays): the port stops answering. */
  halt: () => Promise<void>;
  /** Starts it again after `halt`, on the same port with the same data. */
  resume: () => Promise<void>;
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function startMinio(): Promise<MinioServer> {
  requireTools(['minio']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'triad-minio-'));
  const [port, consolePort] = [await freePort(), await freePort()];
  const accessKey = `test${randomBytes(6).toString('hex')}`;
  const secretKey = randomBytes(18).toString('hex');
  const host = '127.0.0.1';
  const url = `http://${host}:${port}`;
  let proc = await launch({ dir, host, port, consolePort, accessKey, secretKey });
  const halt = () => proc.halt();
  const stop = async () => {
    await proc.halt();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const resume = async () => {
    await proc.halt();
    proc = await launch({ dir, host, port, consolePort, accessKey, secretKey });
  };
  const region = 'us-east-1';
  return {
    url,
    host,
    port,
    accessKey,
    secretKey,
    region,
    client: () => new Client({ endPoint: host, port, useSSL: false, accessKey, secretKey, region }),
    stop,
    halt,
    resume,
  };
}

type LaunchOptions = {
  dir: string;
  host: string;
  port: number;
  consolePort: number;
  accessKey: string;
  secretKey: string;
};

/** Starts the MinIO process on `dir` and waits until it is ready (the directory is removed on failure). */
async function launch(o: LaunchOptions): Promise<{ halt: () => Promise<void> }> {
  const { dir, host, port, consolePort, accessKey, secretKey } = o;
  const url = `http://${host}:${port}`;
  const logFile = path.join(dir, 'minio.log');
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(
    toolPath('minio'),
    [
      'server',
      path.join(dir, 'data'),
      '--address',
      `${host}:${port}`,
      '--console-address',
      `${host}:${consolePort}`,
      '--quiet',
    ],
    {
      stdio: ['ignore', fd, fd],
      env: {
        ...process.env,
        MINIO_ROOT_USER: accessKey,
        MINIO_ROOT_PASSWORD: secretKey,
        MINIO_BROWSER: 'off',
        MINIO_UPDATE: 'off',
        HOME: dir,
      },
    },
  );
  fs.closeSync(fd);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', () => {
      exited = true;
      resolve();
    });
  });
  const halt = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(t);
    }
  };
  const stop = async () => {
    await halt();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const until = Date.now() + 30_000;
  for (;;) {
    if (exited) {
      const log = fs.readFileSync(logFile, 'utf8');
      await stop();
      throw new Error(`minio exited before it was ready:\n${log.slice(-3000)}`);
    }
    const ready = await fetch(`${url}/minio/health/ready`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > until) {
      await stop();
      throw new Error('minio was not ready within 30 s');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { halt };
}
