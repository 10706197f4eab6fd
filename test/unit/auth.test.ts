import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import {
  ALL_SCOPES,
  CURRENT_SCOPES,
  EARLIER_SCOPES,
  scopeAllows,
  type Scope,
} from '../../src/domain/access.ts';
import { loadConfig } from '../../src/config.ts';

const AREAS = ['repo', 'issues', 'pulls', 'releases', 'ci'] as const;
const NON_ADMIN = CURRENT_SCOPES.filter((s) => s !== 'admin' && s !== 'agents:admin');

describe('scopeAllows, current variant', () => {
  test.each(CURRENT_SCOPES.map((s) => [s, s]))('when %s is granted, then %s itself is allowed', (scope) => {
    expect(scopeAllows([scope], scope)).toBe(true);
  });

  test.each(AREAS.map((a) => [a, a]))('when %s:write is granted, then %s:read is implied', (area) => {
    expect(scopeAllows([`${area}:write`], `${area}:read` as Scope)).toBe(true);
  });

  test.each(AREAS.map((a) => [a, a]))('when only %s:read is granted, then %s:write is refused', (area) => {
    expect(scopeAllows([`${area}:read`], `${area}:write` as Scope)).toBe(false);
  });

  test('when a scope of one area is granted, then no scope of another area is allowed', () => {
    for (const granted of NON_ADMIN) {
      for (const needed of CURRENT_SCOPES) {
        const sameArea = granted.split(':')[0] === needed.split(':')[0];
        const expected =
          granted === needed || (sameArea && granted.endsWith(':write') && needed.endsWith(':read'));
        expect([granted, needed, scopeAllows([granted], needed)]).toEqual([granted, needed, expected]);
      }
    }
  });

  test('when admin is granted, then every scope is allowed', () => {
    for (const needed of CURRENT_SCOPES) expect(scopeAllows(['admin'], needed)).toBe(true);
  });

  test('when every non-admin scope is granted, then admin is still refused', () => {
    expect(scopeAllows(NON_ADMIN, 'admin')).toBe(false);
  });

  test('when nothing is granted, then nothing is allowed', () => {
    for (const needed of CURRENT_SCOPES) expect(scopeAllows([], needed)).toBe(false);
  });

  test('when an unknown scope name is granted, then it allows nothing', () => {
    for (const needed of CURRENT_SCOPES)
      expect(scopeAllows(['repo', 'repo:admin', 'ADMIN'], needed)).toBe(false);
  });
});

describe('scopeAllows, earlier variant (coarse scopes)', () => {
  test('when read is granted, then every :read scope is allowed and no :write scope or admin', () => {
    for (const area of AREAS) {
      expect(scopeAllows(['read'], `${area}:read` as Scope)).toBe(true);
      expect(scopeAllows(['read'], `${area}:write` as Scope)).toBe(false);
    }
    expect(scopeAllows(['read'], 'admin')).toBe(false);
  });

  test('when write is granted, then every :read and :write scope is allowed but not admin', () => {
    for (const needed of NON_ADMIN) expect(scopeAllows(['write'], needed)).toBe(true);
    expect(scopeAllows(['write'], 'admin')).toBe(false);
  });

  test('when anything but admin is granted, then agents:admin is refused; agents:admin implies nothing else', () => {
    expect(scopeAllows([...NON_ADMIN, 'read', 'write'], 'agents:admin')).toBe(false);
    expect(scopeAllows(['agents:admin'], 'agents:admin')).toBe(true);
    for (const needed of CURRENT_SCOPES.filter((x) => x !== 'agents:admin')) {
      expect(scopeAllows(['agents:admin'], needed)).toBe(false);
    }
  });

  test('when the earlier admin scope is granted, then everything is allowed', () => {
    for (const needed of CURRENT_SCOPES) expect(scopeAllows(['admin'], needed)).toBe(true);
  });

  test('the accepted scope names are exactly the current and the earlier ones', () => {
    expect([...ALL_SCOPES].sort()).toEqual([...new Set([...CURRENT_SCOPES, ...EARLIER_SCOPES])].sort());
    expect(ALL_SCOPES).toHaveLength(14);
  });
});

describe('loadConfig', () => {
  test('when the environment is empty, then the documented defaults apply', () => {
    const c = loadConfig({});
    expect(c.port).toBe(3000);
    expect(c.host).toBe('0.0.0.0');
    expect(c.baseUrl).toBeUndefined();
    expect(c.dataDir).toBe(path.resolve('./data'));
    expect(c.repoDir).toBe(path.join(path.resolve('./data'), 'repos'));
    expect(c.databaseUrl).toBeUndefined();
    expect(c.admin).toBeUndefined();
    expect(c.agentToken).toBeUndefined();
    expect(c.embeddedAgent).toBe('local');
    expect(c.otlpEndpoint).toBeUndefined();
    expect(c.logLevel).toBe('info');
    expect(c.logRequests).toBe(true);
    expect(c.connections).toEqual({ max: 1000, perClient: 256, firstRequestMs: 10_000 });
    expect(c.authFailures).toEqual({ limit: 10, windowMs: 60_000 });
  });

  test('when variables are set, then they are parsed into the typed config', () => {
    const c = loadConfig({
      PORT: '8080',
      TRIAD_BASE_URL: 'https://triad.example.test/',
      TRIAD_DATA_DIR: '/srv/triad',
      DATABASE_URL: 'postgres://u:p@db:5432/triad',
      TRIAD_ADMIN_TOKEN: 'secret',
      LOG_LEVEL: 'debug',
      TRIAD_LOG_REQUESTS: 'false',
    });
    expect(c.port).toBe(8080);
    expect(c.baseUrl).toBe('https://triad.example.test');
    expect(c.dataDir).toBe('/srv/triad');
    expect(c.repoDir).toBe('/srv/triad/repos');
    expect(c.databaseUrl).toBe('postgres://u:p@db:5432/triad');
    expect(c.embeddedAgent).toBe('off');
    expect(c.admin).toEqual({ username: 'admin', email: 'admin@localhost', token: 'secret' });
    expect(c.logLevel).toBe('debug');
    expect(c.logRequests).toBe(false);
  });

  test('when TRIAD_REPO_DIR is set, then it overrides the data-dir default', () => {
    expect(loadConfig({ TRIAD_DATA_DIR: '/a', TRIAD_REPO_DIR: '/b/repos' }).repoDir).toBe('/b/repos');
  });

  test.each([['abc'], ['70000'], ['-1'], ['80.5'], ['3000abc']])(
    'when PORT is %p, then it throws',
    (port) => {
      expect(() => loadConfig({ PORT: port })).toThrow(/invalid configuration: PORT/);
    },
  );

  test('when a variable is set but empty, then its default applies', () => {
    const c = loadConfig({ PORT: '', LOG_LEVEL: '', TRIAD_DATA_DIR: '', HOST: '', TRIAD_LOG_REQUESTS: '' });
    expect(c.port).toBe(3000);
    expect(c.logLevel).toBe('info');
    expect(c.dataDir).toBe(path.resolve('./data'));
    expect(c.host).toBe('0.0.0.0');
    expect(c.logRequests).toBe(true);
  });

  test('when other values are bad, then it throws naming each of them', () => {
    expect(() => loadConfig({ LOG_LEVEL: 'loud', TRIAD_EMBEDDED_AGENT: 'remote' })).toThrow(
      /LOG_LEVEL.*TRIAD_EMBEDDED_AGENT|TRIAD_EMBEDDED_AGENT.*LOG_LEVEL/,
    );
    expect(() => loadConfig({ TRIAD_BASE_URL: 'triad.example.test' })).toThrow(/TRIAD_BASE_URL/);
    expect(() => loadConfig({ TRIAD_LOG_REQUESTS: 'maybe' })).toThrow(/TRIAD_LOG_REQUESTS/);
  });
});
