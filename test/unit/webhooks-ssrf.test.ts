import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { Sender, retryAfter } from '../../src/webhooks/delivery/sender.ts';
import { addressRefusal, parseAllowedHosts, specialRange } from '../../src/webhooks/ssrf.ts';
import { Receiver } from '../helpers/receiver.ts';

describe('special-purpose ranges', () => {
  test.each([
    ['0.1.2.3', '0.0.0.0/8'],
    ['10.255.0.1', '10.0.0.0/8'],
    ['100.127.255.254', '100.64.0.0/10'],
    ['127.8.8.8', '127.0.0.0/8'],
    ['169.254.169.254', '169.254.0.0/16'],
    ['172.20.0.1', '172.16.0.0/12'],
    ['192.0.0.170', '192.0.0.0/24'],
    ['192.0.2.1', '192.0.2.0/24'],
    ['192.31.196.1', '192.31.196.0/24'],
    ['192.52.193.1', '192.52.193.0/24'],
    ['192.88.99.1', '192.88.99.0/24'],
    ['192.168.0.1', '192.168.0.0/16'],
    ['192.175.48.1', '192.175.48.0/24'],
    ['198.19.255.255', '198.18.0.0/15'],
    ['198.51.100.7', '198.51.100.0/24'],
    ['203.0.113.9', '203.0.113.0/24'],
    ['239.255.255.250', '224.0.0.0/4'],
    ['250.1.1.1', '240.0.0.0/4'],
    ['255.255.255.255', '240.0.0.0/4'],
    ['::', '::/128'],
    ['::1', '::1/128'],
    ['::ffff:127.0.0.1', '::ffff:0:0/96'],
    ['::ffff:8.8.8.8', '::ffff:0:0/96'],
    ['::127.0.0.1', '::/96'],
    ['64:ff9b::a9fe:a9fe', '64:ff9b::/96'],
    ['64:ff9b:1::1', '64:ff9b:1::/48'],
    ['100::1', '100::/64'],
    ['2001::1', '2001::/32'],
    ['2001:2::1', '2001::/23'],
    ['2001:db8:1::1', '2001:db8::/32'],
    ['2002:a9fe:a9fe::1', '2002::/16'],
    ['2620:4f:8000::1', '2620:4f:8000::/48'],
    ['3fff:1::1', '3fff::/20'],
    ['5f00::1', '5f00::/16'],
    ['fc00::1', 'fc00::/7'],
    ['fdff::1', 'fc00::/7'],
    ['fe80::1', 'fe80::/10'],
    ['fec0::1', 'fec0::/10'],
    ['ff02::1', 'ff00::/8'],
    ['4000::1', '2000::/3'],
  ])('%s is in %s', (address, cidr) => {
    expect(specialRange(address)?.cidr).toBe(cidr);
  });

  test.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '100.63.255.255',
    '100.128.0.0',
    '172.32.0.1',
    '2606:4700::1111',
    '2a00:1450::1',
  ])('%s is an ordinary public address', (address) => {
    expect(specialRange(address)).toBeUndefined();
    expect(addressRefusal(parseAllowedHosts('external'), address)).toBeUndefined();
  });
});

describe('TRIAD_WEBHOOK_ALLOWED_HOSTS', () => {
  test('when it lists CIDRs and hosts, then exactly those are allowed beyond the keyword', () => {
    const p = parseAllowedHosts('external, 10.0.0.0/8, 127.0.0.1, ::1, hooks.internal, *.corp.test');
    expect(addressRefusal(p, '10.9.9.9')).toBeUndefined();
    expect(addressRefusal(p, '127.0.0.1')).toBeUndefined();
    expect(addressRefusal(p, '127.0.0.2')).toMatch(/127\.0\.0\.0\/8 \(loopback\)/);
    expect(addressRefusal(p, '::1')).toBeUndefined();
    expect(addressRefusal(p, '::ffff:127.0.0.1')).toMatch(/IPv4-mapped/);
    expect(addressRefusal(p, '8.8.8.8')).toBeUndefined();
    const only = parseAllowedHosts('192.168.5.0/24');
    expect(addressRefusal(only, '192.168.5.20')).toBeUndefined();
    expect(addressRefusal(only, '8.8.8.8')).toMatch(/a public address, which TRIAD_WEBHOOK_ALLOWED_HOSTS/);
    expect(addressRefusal(parseAllowedHosts('*'), '169.254.169.254')).toBeUndefined();
  });

  test('when it is malformed, then the server refuses to start with the reason', () => {
    expect(() => loadConfig({ TRIAD_WEBHOOK_ALLOWED_HOSTS: '10.0.0.0/33' })).toThrow(
      /TRIAD_WEBHOOK_ALLOWED_HOSTS: "10.0.0.0\/33" is neither external, \*, a host name nor a valid CIDR/,
    );
    expect(() => loadConfig({ TRIAD_WEBHOOK_ALLOWED_HOSTS: 'http://x' })).toThrow(/neither external/);
    expect(() => loadConfig({ TRIAD_WEBHOOK_RETRY_SCHEDULE: '5s,soon' })).toThrow(
      /TRIAD_WEBHOOK_RETRY_SCHEDULE/,
    );
    expect(() => loadConfig({ TRIAD_WEBHOOK_TIMEOUT: '0s' })).toThrow(/TRIAD_WEBHOOK_TIMEOUT/);
    const c = loadConfig({});
    expect(c.webhooks.retrySchedule).toEqual([5e3, 3e5, 18e5, 72e5, 18e6, 36e6, 36e6]);
    expect(c.webhooks.timeoutMs).toBe(10_000);
    expect(c.webhooks.allowedHosts.external).toBe(true);
    expect(loadConfig({ TRIAD_WEBHOOK_RETRY_SCHEDULE: 'none' }).webhooks.retrySchedule).toEqual([]);
  });

  test('Retry-After as seconds and as an HTTP date', () => {
    expect(retryAfter('120')).toBe(120_000);
    expect(retryAfter(new Date(Date.now() + 60_000).toUTCString())).toBeGreaterThan(58_000);
    expect(retryAfter('soon')).toBeUndefined();
    expect(retryAfter(undefined)).toBeUndefined();
  });
});

describe('the sender checks where it connects', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await Receiver.start();
  });
  afterAll(async () => {
    await rx.close();
  });
  const body = Buffer.from('{}');

  test.each([
    ['127.0.0.1', /^blocked address: 127\.0\.0\.1 is in 127\.0\.0\.0\/8 \(loopback\)/],
    ['localhost', /^blocked address: localhost resolves to (127\.0\.0\.1|::1) is in/],
    ['[::ffff:127.0.0.1]', /^blocked address: ::ffff:7f00:1 is in ::ffff:0:0\/96 \(IPv4-mapped\)/],
  ])('when the policy is external and the host is %s, then nothing is sent', async (host, error) => {
    const sender = new Sender({ policy: parseAllowedHosts('external'), timeoutMs: 2000 });
    const o = await sender.send(`http://${host}:${rx.port}/x`, {}, body);
    sender.close();
    expect(o).toMatchObject({ status: 0, success: false });
    expect(o.error).toMatch(error);
    expect(rx.requests).toHaveLength(0);
  });

  test('when the policy allows the loopback address, then a name resolving to it is called at the checked address, redirects are not followed, and bodies are capped', async () => {
    const sender = new Sender({ policy: parseAllowedHosts('127.0.0.1,::1'), timeoutMs: 2000 });
    rx.answer = (_r, i) =>
      i === 0
        ? { status: 302, headers: { Location: 'http://127.0.0.1:1/elsewhere' } }
        : { body: 'y'.repeat(70_000) };
    const redirected = await sender.send(`http://localhost:${rx.port}/x`, {}, body);
    expect(redirected).toMatchObject({
      status: 302,
      success: false,
      error: 'HTTP 302 (redirects are not followed)',
    });
    const big = await sender.send(`http://localhost:${rx.port}/x`, {}, body);
    expect(big).toMatchObject({ status: 200, success: true, error: null });
    expect(big.body).toHaveLength(64 * 1024);
    expect(rx.requests.map((r) => r.path)).toEqual(['/x', '/x']);
    const refused = await sender.send('http://127.0.0.1:1/', {}, body);
    expect(refused).toMatchObject({ status: 0, error: 'connection refused' });
    sender.close();
  });
});
