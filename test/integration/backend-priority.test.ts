import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { runCgi } from '../../src/vcs/process/cgi.ts';
import type { VcsDriver } from '../../src/vcs/driver.ts';
import { serveBackend, TransportServers } from '../../src/vcs/transport.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { commandStream } from '../../src/vcs/process/stream.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { tempDir } from '../helpers/vcs.ts';
import { WorkingCopy } from '../helpers/clients.ts';

/** The niceness of a process, from /proc/<pid>/stat (field 19; the command name may hold spaces). */
async function niceOf(pid: number | string): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/**
 * The niceness of the process's session autogroup (priority.ts), or undefined when the kernel has
 * no autogroups.
 */
async function autogroupNiceOf(pid: number | string): Promise<number | undefined> {
  const line = await fs.readFile(`/proc/${pid}/autogroup`, 'utf8').catch(() => undefined);
  return line === undefined ? undefined : Number(/nice (-?\d+)/.exec(line)?.[1]);
}

/**
 * Whether the session groups can be checked: the kernel has them, and the test runs as root (an
 * unprivileged writer may hit the kernel's rate limit when other tests start backends meanwhile).
 */
const groupsChecked = async () => process.getuid?.() === 0 && (await autogroupNiceOf('self')) !== undefined;

/** What a process started with `increment` more niceness than this one ends up with. */
const lowered = async (increment: number) => Math.min(19, (await niceOf('self')) + increment);

describe('TRIAD_BACKEND_NICE', () => {
  test('defaults to 10 and accepts 0 to 19 only', () => {
    expect(loadConfig({}).backendNice).toBe(10);
    expect(loadConfig({ TRIAD_BACKEND_NICE: '0' }).backendNice).toBe(0);
    expect(() => loadConfig({ TRIAD_BACKEND_NICE: '20' })).toThrow(/TRIAD_BACKEND_NICE/);
    expect(() => loadConfig({ TRIAD_BACKEND_NICE: '-5' })).toThrow(/TRIAD_BACKEND_NICE/);
  });
});

describe('the clone URLs backends run at a lower CPU priority than the server', () => {
  let s: TestServer;
  let owner: TestUser;
  let org: string;
  withOrgServer({ TRIAD_BACKEND_NICE: '7', TRIAD_HG_WORKERS: '1' }, (w) => ({ s, owner, org } = w));

  test('when an hg clone is served, then the pooled hgweb worker runs 7 niceness steps below the server', async () => {
    const name = uniq('hg');
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'hg' });
    expect(r.status).toBe(201);
    const w = await WorkingCopy.clone('hg', r.body.data.clone_url as string, owner.token);
    await w.commit('a.txt', 'a\n', 'first');
    expect((await w.push()).code).toBe(0);
    const pids = s.running.services.transports.workerPids();
    expect(pids).toHaveLength(1);
    expect(await niceOf(pids[0]!)).toBe(await lowered(7));
    // its session's scheduling group too
    if (await groupsChecked()) expect(await autogroupNiceOf(pids[0]!)).toBe(7);
    expect(await niceOf('self')).toBe(await lowered(0)); // the server itself is untouched
  }, 120_000);
});

describe('a push runs at the server priority, a clone below it', () => {
  let s: TestServer;
  let owner: TestUser;
  let org: string;
  withOrgServer({ TRIAD_BACKEND_NICE: '6' }, (w) => ({ s, owner, org } = w));

  test('when a git push runs, then its receive-pack (and the hooks it runs) are not lowered', async () => {
    const name = uniq('gitnice');
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'git' });
    expect(r.status).toBe(201);
    const store = s.running.services.repos.path({ id: r.body.data.id, vcs: 'git' });
    const out = `${await tempDir('triad-push-nice-')}/nice`;
    const hook = `${store}/hooks/pre-receive`;
    await fs.writeFile(hook, `#!/bin/sh\ncut -d' ' -f19 /proc/$$/stat > '${out}'\ncat >/dev/null\n`, {
      mode: 0o755,
    });
    const w = await WorkingCopy.clone('git', r.body.data.clone_url as string, owner.token);
    await w.commit('a.txt', 'a\n', 'first');
    expect((await w.push()).code).toBe(0);
    expect(Number((await fs.readFile(out, 'utf8')).trim())).toBe(await lowered(0));
  }, 120_000);

  test('when a backend serves a read, then it runs lowered; the same backend serving a push does not', async () => {
    // serveBackend's rule, with a CGI program that answers its own niceness
    const tmp = await tempDir('triad-serve-nice-');
    const driver = {
      transport: {
        backend: () =>
          Promise.resolve({
            command: '/bin/sh',
            args: ['-c', `printf 'Content-Type: text/plain\\r\\n\\r\\n'; cut -d' ' -f19 /proc/$$/stat`],
            pathInfo: '',
            env: {},
          }),
      },
    } as unknown as VcsDriver;
    const servers = new TransportServers({
      concurrency: 2,
      queue: 2,
      wsgiWorkers: 1,
      nice: 6,
      pool: new ProcessPool(),
    });
    let push = false;
    const server = http.createServer((req, res) => {
      const b = {
        repoPath: tmp,
        subpath: '',
        scriptName: '/x',
        query: '',
        remoteUser: undefined,
        write: push,
        req,
        res,
        input: undefined,
        ...(push ? { output: `${tmp}/held` } : {}),
        tmpDir: tmp,
        scriptDir: tmp,
        signal: new AbortController().signal,
      };
      void serveBackend(driver, b, servers).then(async () => {
        if (push) res.end(await fs.readFile(`${tmp}/held`));
        else res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const ask = async () => {
        const r = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
        return Number((await r.text()).trim());
      };
      expect(await ask()).toBe(await lowered(6));
      push = true;
      expect(await ask()).toBe(await lowered(0));
    } finally {
      servers.close();
      await new Promise((resolve) => server.close(resolve));
      await fs.rm(tmp, { recursive: true, force: true });
    }
  });
});

describe('runCgi', () => {
  let tmp: string;
  let server: http.Server;
  let nice: number | undefined;
  beforeAll(async () => {
    tmp = await tempDir('triad-cgi-nice-');
    // A CGI program that answers its own niceness and that of a process it starts.
    server = http.createServer((req, res) => {
      const script = `printf 'Content-Type: text/plain\\r\\n\\r\\n'; cut -d' ' -f19 /proc/$$/stat; cut -d' ' -f19 /proc/self/stat`;
      void runCgi({
        command: '/bin/sh',
        args: ['-c', script],
        env: {},
        req,
        res,
        pathInfo: '',
        scriptName: '/x',
        queryString: '',
        tmpDir: tmp,
        signal: new AbortController().signal,
        ...(nice === undefined ? {} : { nice }),
      }).then(() => res.end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await fs.rm(tmp, { recursive: true, force: true });
  });
  const ask = async () => {
    const { port } = server.address() as AddressInfo;
    const r = await fetch(`http://127.0.0.1:${port}/`);
    expect(r.status).toBe(200);
    return (await r.text()).trim().split('\n').map(Number);
  };

  test('when given a niceness, then the program and the processes it starts run at it', async () => {
    nice = 5;
    expect(await ask()).toEqual([await lowered(5), await lowered(5)]);
  });

  test('when given none or 0, then the program runs at the server priority', async () => {
    nice = undefined;
    expect(await ask()).toEqual([await lowered(0), await lowered(0)]);
    nice = 0;
    expect(await ask()).toEqual([await lowered(0), await lowered(0)]);
  });
});

describe('commandStream (raw downloads, source archives)', () => {
  const niceness = async (nice: number) => {
    const out: Buffer[] = [];
    const script = `cut -d' ' -f19 /proc/$$/stat; cut -d' ' -f19 /proc/self/stat; cat /proc/self/autogroup 2>/dev/null || true`;
    for await (const chunk of commandStream('/bin/sh', ['-c', script], process.env, nice)) out.push(chunk);
    const [own, child, group] = Buffer.concat(out).toString('utf8').trim().split('\n');
    return {
      own: Number(own),
      child: Number(child),
      group: group === undefined ? undefined : Number(/nice (-?\d+)/.exec(group)?.[1]),
    };
  };

  test('when given a niceness, then the command, what it starts and its session group run at it; 0 leaves the server priority', async () => {
    const groups = await groupsChecked();
    const nine = await niceness(9);
    expect([nine.own, nine.child]).toEqual([await lowered(9), await lowered(9)]);
    if (groups) expect(nine.group).toBe(9);
    const zero = await niceness(0);
    expect([zero.own, zero.child]).toEqual([await lowered(0), await lowered(0)]);
    if (groups) expect(zero.group).toBe(0); // a new session's group starts at 0 and is left there
  });
});
