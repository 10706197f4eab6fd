import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which webhook targets the server may call (`TRIAD_WEBHOOK_ALLOWED_HOSTS`), checked when a
 * webhook is created or its URL changed, and again for every delivery: the dispatcher resolves
 * the host itself, checks every address, and connects to the address it checked (`lookup` below),
 * so a name that resolves differently the second time (DNS rebinding) gains nothing.
 *
 * Address parsing and range matching are ipaddr.js; the ranges refused are the lists below.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = { cidr: string; name: string; net: [Address, number] };

const range = (cidr: string, name: string): Range => ({ cidr, name, net: ipaddr.parseCIDR(cidr) });

/** The IANA IPv4 Special-Purpose Address Registry, plus multicast and the limited broadcast. */
const SPECIAL_V4: readonly Range[] = [
  range('0.0.0.0/8', '"this network"'),
  range('10.0.0.0/8', 'private-use'),
  range('100.64.0.0/10', 'shared address space (carrier-grade NAT)'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local, cloud metadata services'),
  range('172.16.0.0/12', 'private-use'),
  range('192.0.0.0/24', 'IETF protocol assignments'),
  range('192.0.2.0/24', 'documentation (TEST-NET-1)'),
  range('192.31.196.0/24', 'AS112-v4'),
  range('192.52.193.0/24', 'AMT'),
  range('192.88.99.0/24', 'deprecated 6to4 relay anycast'),
  range('192.168.0.0/16', 'private-use'),
  range('192.175.48.0/24', 'direct delegation AS112 service'),
  range('198.18.0.0/15', 'benchmarking'),
  range('198.51.100.0/24', 'documentation (TEST-NET-2)'),
  range('203.0.113.0/24', 'documentation (TEST-NET-3)'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
  range('255.255.255.255/32', 'limited broadcast'),
];

/**
 * The IANA IPv6 Special-Purpose Address Registry and the address architecture's non-unicast
 * blocks, most specific first. Every range that embeds an IPv4 address (mapped, compatible,
 * NAT64, 6to4, Teredo) is refused whole: the embedded address may be anything. Beyond these,
 * any address outside global unicast 2000::/3 is refused too.
 */
const SPECIAL_V6: readonly Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('::ffff:0:0/96', 'IPv4-mapped'),
  range('::/96', 'IPv4-compatible (deprecated)'),
  range('64:ff9b::/96', 'IPv4/IPv6 translation (NAT64)'),
  range('64:ff9b:1::/48', 'local-use IPv4/IPv6 translation'),
  range('100::/64', 'discard-only'),
  range('100:0:0:1::/64', 'dummy IPv6 prefix'),
  range('2001::/32', 'Teredo'),
  range('2001:db8::/32', 'documentation'),
  range('2001::/23', 'IETF protocol assignments'),
  range('2002::/16', '6to4'),
  range('2620:4f:8000::/48', 'direct delegation AS112 service'),
  range('3fff::/20', 'documentation'),
  range('5f00::/16', 'segment routing (SRv6) SIDs'),
  range('fc00::/7', 'unique local'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'site-local (deprecated)'),
  range('ff00::/8', 'multicast'),
];
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** The special-purpose range an address is in, or undefined for an ordinary public address. */
export function specialRange(address: string): { cidr: string; name: string } | undefined {
  const a = parseAddress(address);
  if (a === undefined) return { cidr: address, name: 'not an IP address' };
  const list = a.kind() === 'ipv4' ? SPECIAL_V4 : SPECIAL_V6;
  const hit = list.find((r) => r.net[0].kind() === a.kind() && a.match(r.net));
  if (hit !== undefined) return { cidr: hit.cidr, name: hit.name };
  if (a.kind() === 'ipv6' && !a.match(GLOBAL_UNICAST_V6)) {
    return { cidr: '2000::/3', name: 'outside global unicast' };
  }
  return undefined;
}

function parseAddress(text: string): Address | undefined {
  const t = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const family = net.isIP(t);
  if (family === 0) return undefined;
  try {
    // IPv6 in its canonical hex form first: ipaddr.js reads any dotted tail (`::1.2.3.4`) as
    // IPv4-mapped, which would name the wrong range for IPv4-compatible addresses.
    return ipaddr.parse(family === 6 ? new URL(`http://[${t}]/`).hostname.slice(1, -1) : t);
  } catch {
    return undefined;
  }
}

export type HostPolicy = {
  /** The setting as written, for messages. */
  text: string;
  /** `*`: every target. */
  any: boolean;
  /** `external`: every address outside the special-purpose ranges. */
  external: boolean;
  /** Host names allowed whatever they resolve to (`*.example.com` matches subdomains). */
  hosts: readonly string[];
  /** Addresses and CIDRs allowed even when special-purpose. */
  nets: readonly [Address, number][];
};

const HOST_PATTERN = /^(\*\.)?([a-z0-9_]([a-z0-9_-]*[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?\.?$/;

/** Parses `TRIAD_WEBHOOK_ALLOWED_HOSTS`: `external`, `*`, or a comma list of those, host names and CIDRs. */
export function parseAllowedHosts(text: string): HostPolicy {
  const policy = {
    text,
    any: false,
    external: false,
    hosts: [] as string[],
    nets: [] as [Address, number][],
  };
  const items = text
    .split(',')
    .map((x) => x.trim().toLowerCase())
    .filter((x) => x !== '');
  if (items.length === 0) throw new Error('must name at least one entry (external, *, hosts or CIDRs)');
  for (const item of items) {
    if (item === '*') policy.any = true;
    else if (item === 'external') policy.external = true;
    else if (item.includes('/')) {
      const [addr = '', bits = ''] = item.split('/');
      if (net.isIP(addr) === 0 || !/^\d{1,3}$/.test(bits) || !ipaddr.isValidCIDR(item)) {
        throw new Error(`"${item}" is neither external, *, a host name nor a valid CIDR`);
      }
      policy.nets.push(ipaddr.parseCIDR(item));
    } else if (net.isIP(item) !== 0) {
      const a = ipaddr.parse(item);
      policy.nets.push([a, a.kind() === 'ipv4' ? 32 : 128]);
    } else if (HOST_PATTERN.test(item)) policy.hosts.push(item.replace(/\.$/, ''));
    else throw new Error(`"${item}" is neither external, *, a host name nor a valid CIDR`);
  }
  return policy;
}

/** Is this host name itself on the allow list (then its addresses are not checked)? */
export function hostAllowed(policy: HostPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return policy.hosts.some((p) => (p.startsWith('*.') ? h.endsWith(p.slice(1)) : h === p));
}

/** Why an address may not be called, or undefined when it may. */
export function addressRefusal(policy: HostPolicy, address: string): string | undefined {
  if (policy.any) return undefined;
  const a = parseAddress(address);
  if (a === undefined) return `${address} is not an IP address`;
  if (policy.nets.some(([n, bits]) => n.kind() === a.kind() && a.match(n, bits))) return undefined;
  const special = specialRange(address);
  if (policy.external && special === undefined) return undefined;
  const where = special === undefined ? 'a public address' : `in ${special.cidr} (${special.name})`;
  return `${address} is ${where}, which TRIAD_WEBHOOK_ALLOWED_HOSTS (${policy.text}) does not allow`;
}

/** The host of a URL without IPv6 brackets. */
export function urlHost(url: URL): string {
  const h = url.hostname;
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;
const systemResolver: Resolver = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

/**
 * The check at creation: why this URL's host may not be called, or undefined. A name that does
 * not resolve (yet) is accepted: each delivery resolves and checks it again.
 */
export async function targetRefusal(
  policy: HostPolicy,
  url: URL,
  resolve: Resolver = systemResolver,
): Promise<string | undefined> {
  if (policy.any) return undefined;
  const host = urlHost(url);
  if (net.isIP(host) !== 0) return addressRefusal(policy, host);
  if (hostAllowed(policy, host)) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const addresses = await Promise.race([
    resolve(host).catch(() => []),
    new Promise<[]>((r) => {
      timer = setTimeout(() => r([]), 5_000);
    }),
  ]);
  clearTimeout(timer);
  for (const a of addresses) {
    const why = addressRefusal(policy, a.address);
    if (why !== undefined) return `host ${host} resolves to ${why}`;
  }
  return undefined;
}

/** A refused target, reported in the delivery's `error`. */
export class BlockedAddressError extends Error {
  readonly code = 'EBLOCKEDADDRESS';
}

/**
 * A `lookup` for `http.request`: resolves every address of the host, refuses the connection when
 * any of them is not allowed, and otherwise hands the checked addresses to the socket, which
 * connects to one of exactly those.
 */
export function guardedLookup(policy: HostPolicy): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err !== null) {
        callback(err, '', 0);
        return;
      }
      if (!hostAllowed(policy, hostname)) {
        for (const a of addresses) {
          const why = addressRefusal(policy, a.address);
          if (why !== undefined) {
            callback(new BlockedAddressError(`blocked address: ${hostname} resolves to ${why}`), '', 0);
            return;
          }
        }
      }
      const first = addresses[0];
      if (first === undefined) {
        callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      } else if (options.all === true) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}
