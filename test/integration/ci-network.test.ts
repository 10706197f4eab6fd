import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { runProcess } from '../../agent/executors/process.ts';
import { Sandbox } from '../../agent/executors/sandbox.ts';
import { NODE } from '../helpers/process.ts';
import { ok, tempDir } from '../helpers/vcs.ts';

/**
 * The network of a sandboxed step (TRIAD_CI_NETWORK), with the real bwrap and slirp4netns, as
 * root. "The internet" is a network namespace made here, joined to this host by a veth pair,
 * with a TCP server on 11.22.33.1 (a public unicast address): a step on the outbound
 * network reaches it; loopback, the host's own addresses, private and link-local ones it never
 * reaches; a step without a network reaches nothing.
 */

const root = process.getuid?.() === 0;
const id = randomBytes(3).toString('hex');
const ns = `triad-inet-${id}`;
const hostIf = `trdh${id}`;
const nsIf = `trdn${id}`;
const PUBLIC = '11.22.33.1';
const HOST_SIDE = '11.22.33.2';
/** Addresses of the same namespace in ranges a step must not reach (routed there from this host). */
const PRIVATE = '10.99.0.1';
const LINK_LOCAL = '169.254.99.1';
const BENCHMARK = '198.18.0.1';
const PUBLIC_PORT = 18080;
let internet: ChildProcess | undefined;
let loopback: net.Server;
let loopbackPort = 0;
let work: string;

async function ip(...args: string[]): Promise<void> {
  await ok('ip', args, '/');
}

beforeAll(async () => {
  if (!root) throw new Error('these tests run the sandbox as root (bwrap as the step user, slirp4netns)');
  await ip('netns', 'add', ns);
  await ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  await ip('link', 'set', nsIf, 'netns', ns);
  await ip('addr', 'add', `${HOST_SIDE}/30`, 'dev', hostIf);
  await ip('link', 'set', hostIf, 'up');
  await ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${PUBLIC}/30`, 'dev', nsIf);
  await ip('netns', 'exec', ns, 'ip', 'link', 'set', nsIf, 'up');
  await ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');
  for (const a of [PRIVATE, LINK_LOCAL, BENCHMARK]) {
    await ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${a}/32`, 'dev', nsIf);
    await ip('route', 'add', `${a}/32`, 'dev', hostIf);
  }
  const server = `require('net').createServer((c) => c.end('reached\\n')).listen(${PUBLIC_PORT}, '0.0.0.0', () => console.log('up'))`;
  internet = spawn('ip', ['netns', 'exec', ns, NODE, '-e', server], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    internet!.stdout!.once('data', () => resolve());
    internet!.once('exit', (c) => reject(new Error(`the internet server exited (${c})`)));
  });
  // a service of this host on every address, as PostgreSQL or the Triad server may be
  loopback = net.createServer((c) => c.end('host-secret\n'));
  await new Promise<void>((r) => loopback.listen(0, '0.0.0.0', r));
  loopbackPort = (loopback.address() as net.AddressInfo).port;
  work = await tempDir('triad-net-');
  await fs.chmod(work, 0o755);
}, 60_000);

afterAll(async () => {
  internet?.kill('SIGKILL');
  loopback?.close();
  await ok('ip', ['link', 'del', hostIf], '/').catch(() => undefined);
  await ok('ip', ['netns', 'del', ns], '/').catch(() => undefined);
});

/** A workspace the sandbox user owns, as the local executor makes it. */
async function workspace(sandbox: Sandbox): Promise<string> {
  const dir = await fs.mkdtemp(path.join(work, 'ws-'));
  await fs.mkdir(path.join(dir, 'src'));
  const who = await sandbox.identity();
  for (const d of [dir, path.join(dir, 'src')]) await fs.chown(d, who.uid, who.gid);
  return dir;
}

async function runIn(sandbox: Sandbox, script: string): Promise<{ code: number; out: string }> {
  const spec = await sandbox.spec(await workspace(sandbox), script, {}, sandbox.o.network);
  let out = '';
  const code = await runProcess(spec, new AbortController().signal, (d) => (out += d.toString()));
  return { code, out };
}

/** `NAME=ok` when a TCP connection to host:port opens, else `NAME=refused`. */
const probe = (name: string, host: string, port: number) =>
  `if timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port}; cat <&3' 2>/dev/null; then echo ${name}=ok; else echo ${name}=refused; fi`;

function hostIPv4(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((l) => l ?? [])
    .filter((a) => a.family === 'IPv4' && !a.internal)
    .map((a) => a.address);
}

describe('the step network (TRIAD_CI_NETWORK)', () => {
  test('when it is outbound, then a step reaches a public address and nothing of the host or a private network', async () => {
    const sandbox = new Sandbox({ network: 'outbound' });
    const host = hostIPv4();
    const script = [
      probe('public', PUBLIC, PUBLIC_PORT),
      probe('loopback', '127.0.0.1', loopbackPort),
      probe('gateway', '10.0.2.2', loopbackPort),
      probe('linklocal', LINK_LOCAL, PUBLIC_PORT),
      probe('private', PRIVATE, PUBLIC_PORT),
      probe('benchmark', BENCHMARK, PUBLIC_PORT),
      probe('veth', HOST_SIDE, loopbackPort),
      ...host.map((a, i) => probe(`host${i}`, a, loopbackPort)),
      'cat /etc/resolv.conf',
      'ip route',
    ].join('\n');
    const { code, out } = await runIn(sandbox, script);
    expect([code, out]).toEqual([0, expect.stringContaining('public=ok')]);
    expect(out).toContain('reached');
    for (const name of ['loopback', 'gateway', 'linklocal', 'private', 'benchmark', 'veth']) {
      expect([name, out.includes(`${name}=refused`)]).toEqual([name, true]);
    }
    host.forEach((a, i) => expect([a, out.includes(`host${i}=refused`)]).toEqual([a, true]));
    expect(out).not.toContain('host-secret');
    expect(out.match(/reached/g)).toHaveLength(1);
    // the DNS forwarder of the user-mode stack, not the host's resolver
    expect(out).toContain('nameserver 10.0.2.3');
    expect(out).toMatch(/^prohibit 10\.0\.0\.0\/8/m);
    // Azure's platform endpoint (not routed here: the test does not take that address over)
    expect(out).toMatch(/^prohibit 168\.63\.129\.16 /m);
  }, 60_000);

  test('when the step tries to change its routes or make a namespace of its own, then it is refused', async () => {
    const sandbox = new Sandbox({ network: 'outbound' });
    const { out } = await runIn(
      sandbox,
      [
        'ip route del prohibit 10.0.0.0/8 2>&1 || echo ROUTE-REFUSED',
        'unshare -Ur id 2>&1 || echo USERNS-REFUSED',
        'unshare -n true 2>&1 || echo NETNS-REFUSED',
      ].join('\n'),
    );
    expect(out).toContain('ROUTE-REFUSED');
    expect(out).toContain('USERNS-REFUSED');
    expect(out).toContain('NETNS-REFUSED');
    expect(out).not.toMatch(/uid=0/);
  }, 60_000);

  test('when it is none, then a step has only its loopback', async () => {
    const sandbox = new Sandbox({ network: 'none' });
    const { code, out } = await runIn(
      sandbox,
      [
        probe('public', PUBLIC, PUBLIC_PORT),
        probe('loopback', '127.0.0.1', loopbackPort),
        'ip -br link',
      ].join('\n'),
    );
    expect(code).toBe(0);
    expect(out).toContain('public=refused');
    expect(out).toContain('loopback=refused');
    expect(out).not.toContain('tap0');
  }, 60_000);

  test('when a step ends, then its slirp4netns ends too', async () => {
    const sandbox = new Sandbox({ network: 'outbound' });
    await runIn(sandbox, 'true');
    // a slirp4netns left behind serves the namespace of a sandbox process that is gone
    const orphans = async () => {
      const ps = await ok('ps', ['-eo', 'args'], '/');
      const pids = ps
        .split('\n')
        .filter((l) => l.startsWith('slirp4netns') || l.includes('/slirp4netns '))
        .map((l) => /\/proc\/(\d+)\/ns\/net/.exec(l)?.[1])
        .filter((p): p is string => p !== undefined);
      const gone: string[] = [];
      for (const p of pids) if (!(await fs.stat(`/proc/${p}`).catch(() => undefined))) gone.push(p);
      return gone;
    };
    let left = await orphans();
    for (let i = 0; i < 30 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await orphans();
    }
    expect(left).toEqual([]);
  }, 60_000);
});
