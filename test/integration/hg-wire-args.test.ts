/**
 * Mercurial wire commands sent without the arguments they require (or, for reads, with arguments
 * Mercurial cannot use) are the client's error: 400 in plain text, the reason logged at debug,
 * no traceback at error level, and the worker goes on serving.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { startServer, type Running } from '../../src/server.ts';
import { WorkingCopy } from '../helpers/clients.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { Client, freshDatabase, uniq, type TestServer } from '../helpers/server.ts';
import { basic } from '../helpers/transport.ts';

type Line = { level: number; msg?: string; [k: string]: unknown };
const lines: Line[] = [];
let running: Running;
let dataDir: string;
let dbUrl: string;
let admin: Client;
const ADMIN_TOKEN = `adm_${uniq('wire')}`;
let org: string;
let repo: { name: string; id: number; clone: string };

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-test-data-'));
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  dbUrl = await freshDatabase();
  const config = loadConfig({
    DATABASE_URL: dbUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    TRIAD_DATA_DIR: dataDir,
    TRIAD_ADMIN_USERNAME: 'root',
    TRIAD_ADMIN_TOKEN: ADMIN_TOKEN,
    TRIAD_EMBEDDED_AGENT: 'off',
    TRIAD_LOG_REQUESTS: 'false',
    TRIAD_TRANSPORT_SPOOL_DIR: path.join(dataDir, 'spool'),
    TRIAD_IDLE_GC_SECONDS: '0',
    TRIAD_BACKEND_NICE: '0',
    TRIAD_HG_WORKERS: '1',
  });
  running = await startServer(config, { log: pino({ level: 'debug' }, sink) });
  admin = new Client(running.url).as(ADMIN_TOKEN);
  org = uniq('wire');
  expect((await admin.post('/api/v1/orgs', { name: org })).status).toBe(201);
  const r = await admin.post(`/api/v1/orgs/${org}/repos`, { name: uniq('h'), vcs: 'hg', is_private: false });
  expect(r.status).toBe(201);
  repo = { name: r.body.data.name, id: r.body.data.id, clone: r.body.data.clone_url };
  const w = await WorkingCopy.clone('hg', repo.clone, ADMIN_TOKEN);
  await w.commit('a.txt', 'a\n', 'first');
  expect((await w.push()).code).toBe(0);
}, 60_000);
afterAll(async () => {
  await running.close();
  await fs.rm(dataDir, { recursive: true, force: true });
});

const UNKNOWN = '1'.repeat(40);

function wire(query: string, token?: string, method = 'GET'): Promise<Response> {
  return fetch(`${running.url}/${org}/${repo.name}?${query}`, {
    method,
    headers: token === undefined ? {} : { authorization: basic(token) },
    signal: AbortSignal.timeout(30_000),
  });
}

describe('Mercurial wire commands with missing or unusable arguments', () => {
  test('when every wire command is sent without its arguments, then those that need some answer 400 in plain text (pushes too, with credentials), the others answer as usual, and nothing is logged at error level', async () => {
    const since = lines.length;
    const missing: Record<string, string> = {
      batch: 'cmds',
      between: 'pairs',
      branches: 'nodes',
      changegroup: 'roots',
      changegroupsubset: 'bases',
      known: 'nodes',
      listkeys: 'namespace',
      lookup: 'key',
      protocaps: 'caps',
    };
    for (const [cmd, arg] of Object.entries(missing)) {
      const r = await wire(`cmd=${cmd}`);
      expect([cmd, r.status]).toEqual([cmd, 400]);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(await r.text()).toBe(`missing argument '${arg}' of wire command '${cmd}'\n`);
    }
    for (const cmd of [
      'branchmap',
      'capabilities',
      'clonebundles',
      'getbundle',
      'heads',
      'hello',
      'stream_out',
    ]) {
      const r = await wire(`cmd=${cmd}`);
      expect([cmd, r.status]).toEqual([cmd, 200]);
      await r.arrayBuffer();
    }
    // pushes: anonymous ones are challenged first; with credentials, the same 400, nothing recorded
    for (const cmd of ['unbundle', 'pushkey']) {
      expect((await wire(`cmd=${cmd}`, undefined, 'POST')).status).toBe(401);
      const r = await wire(`cmd=${cmd}`, ADMIN_TOKEN, 'POST');
      expect([cmd, r.status]).toEqual([cmd, 400]);
      expect(await r.text()).toMatch(new RegExp(`^missing argument '\\w+' of wire command '${cmd}'\n$`));
    }
    const events = await outboxEvents({ dbUrl } as Pick<TestServer, 'dbUrl'> as TestServer, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push']); // the first commit's push only

    const logged = lines.slice(since);
    expect(logged.filter((l) => l.level >= 50)).toEqual([]);
    expect(JSON.stringify(logged.filter((l) => l.level >= 30))).not.toMatch(/Traceback/);
    const refused = logged.filter((l) => l.msg === 'repository backend refused the request');
    expect(refused.length).toBeGreaterThanOrEqual(Object.keys(missing).length);
    expect(refused.every((l) => l.level === 20 && l.status === 400)).toBe(true);
  }, 120_000);

  test('when read commands carry arguments Mercurial cannot use (not hex, unknown nodes, a malformed batch), then 400, and a clone still works afterwards', async () => {
    const since = lines.length;
    for (const query of [
      'cmd=known&nodes=zz',
      'cmd=between&pairs=zz',
      `cmd=branches&nodes=${UNKNOWN}`,
      `cmd=getbundle&heads=${UNKNOWN}`,
      'cmd=getbundle&heads=1234',
      'cmd=batch&cmds=lookup',
      'cmd=batch&cmds=nosuch+x%3D1',
    ]) {
      const r = await wire(query);
      expect([query, r.status]).toEqual([query, 400]);
      expect(await r.text()).toMatch(/^invalid arguments of wire command '\w+'\n$/);
    }
    // arguments that are fine keep their usual answers
    const found = await wire('cmd=lookup&key=tip');
    expect(found.status).toBe(200);
    expect(await found.text()).toMatch(/^1 [0-9a-f]{40}\n$/);
    expect(lines.slice(since).filter((l) => l.level >= 50)).toEqual([]);

    const w = await WorkingCopy.clone('hg', repo.clone, ADMIN_TOKEN);
    expect(await fs.readFile(path.join(w.dir, 'a.txt'), 'utf8')).toBe('a\n');
  }, 120_000);
});
