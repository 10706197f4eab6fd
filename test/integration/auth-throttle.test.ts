import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { requestFrom, type Answer } from '../helpers/from-address.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { sh, tempDir, withCreds } from '../helpers/vcs.ts';
import { sleep } from '../helpers/wait.ts';

// Failed authentications are counted per client address and per presented credential; guessing
// from an address answers 429 `rate_limited` with Retry-After, on the API and on clone URLs (one
// shared counter), while valid credentials in use from that address, and agents, go on working.
// See docs/api.md, "Throttling failed authentications".

const from = requestFrom;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const basic = (token: string) => ({ authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` });
const guess = () => uniq('triad_guess_');

function expectLimited(r: Answer, windowSeconds: number): number {
  expect(r.status).toBe(429);
  const after = Number(r.headers['retry-after']);
  expect(Number.isInteger(after)).toBe(true);
  expect(after).toBeGreaterThanOrEqual(1);
  expect(after).toBeLessThanOrEqual(windowSeconds);
  return after;
}

/** `count` distinct bad tokens from `ip`, each answered 401. */
async function guesses(s: TestServer, ip: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const r = await from(s.url, ip, '/api/v1/user', bearer(guess()));
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('unauthorized');
  }
}

// The window is long enough for a loaded machine to send the requests a test expects refused
// within it (with 2 s, and so one fresh guess per 667 ms once blocked, it missed); only the first
// test waits for its end.
const WINDOW = 10;

describe('with a limit of 3 failures in 10 s, addresses taken from the socket', () => {
  let s: TestServer;
  let user: TestUser;
  let org: string;
  const repo = 'pub';

  beforeAll(async () => {
    ({
      s,
      owner: user,
      org,
    } = await serverWithOrg({
      TRIAD_AUTH_FAILURE_LIMIT: '3',
      TRIAD_AUTH_FAILURE_WINDOW_SECONDS: String(WINDOW),
    }));
    expect((await user.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' })).status).toBe(
      201,
    );
  });
  afterAll(async () => {
    await s.close();
  });

  test('guessing from one address gets 429 with Retry-After, while a valid token in use from that address still passes', async () => {
    expect((await from(s.url, '127.0.0.2', '/api/v1/user', bearer(user.token))).status).toBe(200);
    const first = guess();
    expect((await from(s.url, '127.0.0.2', '/api/v1/user', bearer(first))).status).toBe(401);
    await guesses(s, '127.0.0.2', 2);
    const limited = await from(s.url, '127.0.0.2', '/api/v1/user', bearer(guess()));
    expectLimited(limited, WINDOW);
    expect(limited.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } });
    expect(limited.headers['x-content-type-options']).toBe('nosniff');
    // A token that failed there is refused at once too, until the window ends …
    const blockedFor = expectLimited(await from(s.url, '127.0.0.2', '/api/v1/user', bearer(first)), WINDOW);
    // … but the valid token is not refused for the guesser's failures, on the API and clone URLs …
    const ok = await from(s.url, '127.0.0.2', '/api/v1/user', bearer(user.token));
    expect(ok.status).toBe(200);
    expect(ok.body.data.username).toBe(user.username);
    const refs = `/${org}/${repo}/info/refs?service=git-upload-pack`;
    expect((await from(s.url, '127.0.0.2', refs, basic(user.token))).status).toBe(200);
    // … requests without credentials are not throttled, and another address is unaffected.
    expect((await from(s.url, '127.0.0.2', `/api/v1/orgs/${org}`)).status).toBe(200);
    expect((await from(s.url, '127.0.0.3', '/api/v1/user', bearer(guess()))).status).toBe(401);
    // After the window the address may try new tokens again, as many as the limit back to back
    // (while blocked, a second fresh one within 3.3 s would get 429).
    await sleep(blockedFor * 1000 + 300);
    await guesses(s, '127.0.0.2', 3);
  });

  test('clone URLs share the counter: bad Basic credentials block guessing on both', async () => {
    const refs = `/${org}/${repo}/info/refs?service=git-upload-pack`;
    for (let i = 0; i < 2; i += 1)
      expect((await from(s.url, '127.0.0.4', refs, basic(guess()))).status).toBe(401);
    expect((await from(s.url, '127.0.0.4', '/api/v1/user', bearer(guess()))).status).toBe(401);
    const limited = await from(s.url, '127.0.0.4', refs, basic(guess()));
    expectLimited(limited, WINDOW);
    expect(limited.body).toContain('too many failed authentications');
    expectLimited(await from(s.url, '127.0.0.4', '/api/v1/user', bearer(guess())), WINDOW);
    // The anonymous first request of a clone (before the client sends credentials) still passes,
    // and so does the valid token.
    expect((await from(s.url, '127.0.0.4', refs)).status).toBe(200);
    expect((await from(s.url, '127.0.0.4', refs, basic(user.token))).status).toBe(200);
  });

  test('one bad token repeated gets 429 itself, without refusing other tokens from its address', async () => {
    const stuck = guess();
    for (let i = 0; i < 3; i += 1) {
      expect((await from(s.url, '127.0.0.5', '/api/v1/user', bearer(stuck))).status).toBe(401);
    }
    expectLimited(await from(s.url, '127.0.0.5', '/api/v1/user', bearer(stuck)), WINDOW);
    // A token never used anywhere yet (so not known as valid) passes: the address is not guessing.
    const fresh = await s.newUser();
    expect((await from(s.url, '127.0.0.5', '/api/v1/user', bearer(fresh.token))).status).toBe(200);
    expect((await from(s.url, '127.0.0.5', '/api/v1/user', bearer(guess()))).status).toBe(401);
  });

  test('many new valid tokens at once from one address all pass, while concurrent guesses stop at the limit', async () => {
    const fresh = await Promise.all(Array.from({ length: 12 }, () => s.newUser()));
    const valid = await Promise.all(
      fresh.map((u) => from(s.url, '127.0.0.7', '/api/v1/user', bearer(u.token))),
    );
    expect(valid.map((r) => r.status)).toEqual(fresh.map(() => 200));
    const guessed = await Promise.all(
      Array.from({ length: 10 }, () => from(s.url, '127.0.0.8', '/api/v1/user', bearer(guess()))),
    );
    const statuses = guessed.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(3).fill(401), ...Array(7).fill(429)]);
  });

  test('successful authentications never count', async () => {
    for (let i = 0; i < 10; i += 1) {
      expect((await from(s.url, '127.0.0.6', '/api/v1/user', bearer(user.token))).status).toBe(200);
    }
    await guesses(s, '127.0.0.6', 3);
  });

  test('without TRIAD_TRUST_PROXY a forged X-Forwarded-For does not change the address', async () => {
    for (let i = 0; i < 3; i += 1) {
      const r = await from(s.url, '127.0.0.7', '/api/v1/user', {
        ...bearer(guess()),
        'x-forwarded-for': `198.51.100.${i}`,
      });
      expect(r.status).toBe(401);
    }
    const r = await from(s.url, '127.0.0.7', '/api/v1/user', {
      ...bearer(guess()),
      'x-forwarded-for': '198.51.100.99',
    });
    expectLimited(r, WINDOW);
  });
});

// 30 s: a stall between two requests a test expects refused back to back stays below the 6 s
// between fresh lookups (with 6 s, and so one per 1.2 s, a loaded machine could miss it)
describe('a blocked address (limit 5 in 30 s: one new token per 6 s)', () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '5', TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '30' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('has one new token looked up per window / limit: guessing stays slow, and a valid token the server has not seen yet passes on its turn', async () => {
    await guesses(s, '127.0.0.8', 5);
    const turn = expectLimited(await from(s.url, '127.0.0.8', '/api/v1/user', bearer(guess())), 30);
    expect(turn).toBeLessThanOrEqual(6);
    await sleep(turn * 1000 + 200);
    expect((await from(s.url, '127.0.0.8', '/api/v1/user', bearer(guess()))).status).toBe(401);
    const after = expectLimited(await from(s.url, '127.0.0.8', '/api/v1/user', bearer(guess())), 30);
    expect(after).toBeLessThanOrEqual(6);
    const user = await s.newUser();
    await sleep(after * 1000 + 200);
    const ok = await from(s.url, '127.0.0.8', '/api/v1/user', bearer(user.token));
    expect(ok.status).toBe(200);
    expect(ok.body.data.username).toBe(user.username);
  });

  test("agent tokens are never refused for users' failures from the same address, and agents' failures do not block users", async () => {
    const created = await s.admin.post('/api/v1/admin/agents', { name: uniq('agent') });
    expect(created.status).toBe(201);
    const agentToken = created.body.data.token as string;
    expect(agentToken.startsWith('triad_agent_')).toBe(true);
    // A CI step on the agent's host sends bad tokens (API and clone URL) until it is throttled …
    await guesses(s, '127.0.0.9', 5);
    expectLimited(await from(s.url, '127.0.0.9', '/api/v1/user', bearer(guess())), 30);
    // … and the agent's first poll from that address (its token never seen before) is served.
    const poll = await from(s.url, '127.0.0.9', '/api/v1/ci/poll', bearer(agentToken), 'POST');
    expect(poll.status).toBe(204);
    // Bad agent tokens block agent-token guessing from an address, not users' tokens.
    for (let i = 0; i < 5; i += 1) {
      const r = await from(s.url, '127.0.0.10', '/api/v1/ci/poll', bearer(guess()), 'POST');
      expect(r.status).toBe(401);
    }
    expectLimited(await from(s.url, '127.0.0.10', '/api/v1/ci/poll', bearer(guess()), 'POST'), 30);
    const user = await s.newUser();
    expect((await from(s.url, '127.0.0.10', '/api/v1/user', bearer(user.token))).status).toBe(200);
    // The registered agent itself still polls from there (it authenticated before).
    const again = await from(s.url, '127.0.0.10', '/api/v1/ci/poll', bearer(agentToken), 'POST');
    expect(again.status).toBe(204);
  });
});

describe('behind a trusted proxy (TRIAD_TRUST_PROXY=loopback)', () => {
  let s: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    s = await startTestServer({
      TRIAD_AUTH_FAILURE_LIMIT: '2',
      TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '30',
      TRIAD_TRUST_PROXY: 'loopback',
    });
    user = await s.newUser();
  });
  afterAll(async () => {
    await s.close();
  });

  test('the address is the one the proxy reports in X-Forwarded-For', async () => {
    const client = (ip: string, token: string) => ({ ...bearer(token), 'x-forwarded-for': ip });
    for (let i = 0; i < 2; i += 1) {
      expect((await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.7', guess()))).status).toBe(
        401,
      );
    }
    expectLimited(await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.7', guess())), 30);
    expect((await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.8', guess()))).status).toBe(401);
    const other = await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.8', user.token));
    expect(other.status).toBe(200);
  });
});

describe('a stock client on a blocked address', () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '2', TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '60' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('git sees 429 after repeated bad tokens, and still clones with a valid one', async () => {
    const user = await s.newUser();
    const org = await s.newOrg(user);
    const name = uniq('r');
    // Private, so git gets a 401 challenge and then sends the URL's credentials.
    const created = await user.client.post(`/api/v1/orgs/${org}/repos`, {
      name,
      vcs: 'git',
      is_private: true,
    });
    expect(created.status).toBe(201);
    const dir = await tempDir();
    const url = `${s.url}/${org}/${name}`;
    for (let i = 0; i < 2; i += 1) {
      const r = await sh('git', ['ls-remote', withCreds(url, guess())], dir);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/Authentication failed|401/);
    }
    const r = await sh('git', ['ls-remote', withCreds(url, guess())], dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('429');
    const ok = await sh('git', ['ls-remote', withCreds(url, user.token)], dir);
    expect(ok.code).toBe(0);
    await fs.rm(dir, { recursive: true, force: true });
  });
});
