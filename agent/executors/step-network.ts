import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { Readable, Writable } from 'node:stream';
import ipaddr from 'ipaddr.js';

/**
 * The network of a sandboxed step. `none`: its own network namespace with only loopback.
 * `outbound`: the same namespace plus a tap device served by slirp4netns (a user-mode TCP/IP
 * stack in a process of the host), whose routes refuse every address that is not the public
 * internet: loopback, the private, shared, link-local (cloud metadata) and multicast ranges,
 * and every address of this host. `host` is only for the clone, a fixed script of the agent's.
 */
export type CiNetwork = 'outbound' | 'none';

/**
 * IPv4 ranges a step may never reach (slirp4netns carries no IPv6): every special-purpose range
 * (this network, private, shared, loopback, link-local and so the metadata services of clouds,
 * protocol assignments, documentation, benchmarking, relay, multicast, reserved) and Azure's
 * platform endpoint, which sits at a public address.
 */
export const REFUSED_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '168.63.129.16/32',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

/** slirp4netns' fixed addresses: the gateway (the host, whose loopback is refused) and its DNS forwarder. */
const GATEWAY = '10.0.2.2';
export const STEP_DNS = '10.0.2.3';
const STEP_ADDRESS = '10.0.2.100';
const TAP = 'tap0';
const SETUP_TIMEOUT_MS = 15_000;

const refused = REFUSED_RANGES.map((r) => ipaddr.parseCIDR(r));

/** This host's own IPv4 addresses outside the refused ranges (a public address of the machine). */
export function hostAddresses(): string[] {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.family !== 'IPv4') continue;
      const ip = ipaddr.parse(a.address);
      if (!refused.some((r) => ip.kind() === r[0].kind() && ip.match(r))) out.add(a.address);
    }
  }
  return [...out];
}

/** The `ip -batch` commands that give the step's namespace its only routes. */
export function routeCommands(): string[] {
  return [
    `link set ${TAP} mtu 65520 up`,
    `addr add ${STEP_ADDRESS}/32 dev ${TAP}`,
    `route add ${GATEWAY}/32 dev ${TAP}`,
    `route add ${STEP_DNS}/32 dev ${TAP}`,
    `route add default via ${GATEWAY} dev ${TAP} onlink`,
    ...REFUSED_RANGES.map((r) => `route add prohibit ${r}`),
    ...hostAddresses().map((a) => `route add prohibit ${a}/32`),
  ];
}

function collect(stream: Readable | null | undefined, max = 4000): () => string {
  let text = '';
  stream?.on('data', (d: Buffer) => {
    if (text.length < max) text += d.toString();
  });
  return () => text.trim();
}

function exited(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('error', () => resolve(127));
    child.once('exit', (code) => resolve(code ?? 1));
  });
}

/** Reads bwrap's `--info-fd` JSON (`{"child-pid": N}`) from a pipe. */
export function sandboxPid(info: Readable): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString();
      try {
        const pid = (JSON.parse(text) as { 'child-pid'?: unknown })['child-pid'];
        info.off('data', onData);
        if (typeof pid === 'number' && Number.isInteger(pid) && pid > 1) resolve(pid);
        else reject(new Error(`bwrap reported no sandbox process: ${text}`));
      } catch {
        /* not complete yet */
      }
    };
    info.on('data', onData);
    info.once('end', () => reject(new Error('bwrap ended before the sandbox existed')));
  });
}

/**
 * Gives the network namespace of the sandbox process `pid` outbound access: starts slirp4netns
 * (sandboxed and with its seccomp filter, refusing the host's loopback) on a tap device in it,
 * then sets the namespace's routes from the host. Answers a function that stops slirp4netns.
 * Needs root: the routes are set from outside, where the step cannot change them.
 */
export type NetworkTools = { slirp4netns: string; nsenter: string; ip: string };

export async function attachOutbound(pid: number, tools: NetworkTools): Promise<() => void> {
  const netns = `/proc/${pid}/ns/net`;
  const child = spawn(
    tools.slirp4netns,
    [
      '--mtu=65520',
      '--disable-host-loopback',
      '--enable-sandbox',
      '--enable-seccomp',
      '--ready-fd=3',
      '--exit-fd=4',
      '--netns-type=path',
      netns,
      TAP,
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } },
  );
  const stderr = collect(child.stderr);
  const exit = child.stdio[4] as Writable;
  exit.on('error', () => undefined);
  const stop = () => {
    exit.end();
    const t = setTimeout(() => child.kill('SIGKILL'), 1000);
    child.once('exit', () => clearTimeout(t));
  };
  const gone = exited(child);
  try {
    const ready = new Promise<void>((resolve) => (child.stdio[3] as Readable).once('data', () => resolve()));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), SETUP_TIMEOUT_MS)));
    const first = await Promise.race([ready.then(() => 'ready' as const), gone, timeout]);
    clearTimeout(timer);
    if (first !== 'ready') {
      throw new Error(
        `slirp4netns ${first === 'timeout' ? 'did not start in time' : `exited (${first})`}: ${stderr()}`,
      );
    }
    const routes = spawn(tools.nsenter, [`--net=${netns}`, tools.ip, '-batch', '-'], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    });
    routes.stdin.on('error', () => undefined);
    routes.stdin.end(`${routeCommands().join('\n')}\n`);
    const err = collect(routes.stderr);
    const code = await exited(routes);
    if (code !== 0) throw new Error(`setting the step's routes failed (exit ${code}): ${err()}`);
  } catch (e) {
    stop();
    throw e;
  }
  return stop;
}
