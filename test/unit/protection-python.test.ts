import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from '@jest/globals';
import { refusal, type Pusher, type RefUpdate, type RuleShape } from '../../src/protection/rules.ts';
import { HG } from '../../src/vcs/constants.ts';

/**
 * The Mercurial workers judge pushes with a Python copy of src/protection/rules.ts
 * (src/vcs/hg/triadprotect.py): the same cases through both must give the same answers.
 */
const SCRIPT = fileURLToPath(new URL('../../src/vcs/hg/triadprotect.py', import.meta.url));

const rule = (over: Partial<RuleShape> = {}): RuleShape => ({
  pattern: 'main',
  fast_forward_only: true,
  allow_deletion: false,
  push: 'members',
  ...over,
});
const update = (over: Partial<RefUpdate> = {}): RefUpdate => ({
  name: 'main',
  type: 'branch',
  old: 'a',
  new: 'b',
  fastForward: true,
  ...over,
});
const member: Pusher = { username: 'mia', role: 'member' };
const owner: Pusher = { username: 'olga', role: 'owner' };
const outsider: Pusher = { username: 'zed', role: undefined };

const patterns: [string, string][] = [
  ['main', 'main'],
  ['main', 'main2'],
  ['release/*', 'release/1.0'],
  ['release/*', 'release/1.0/hotfix'],
  ['release/**', 'release/1.0/hotfix'],
  ['**', 'any/thing'],
  ['*', 'feature/x'],
  ['@', '@'],
  ['v1.*', 'v1x2'],
  ['v1.*', 'v1.2'],
  ['a+b(c)', 'a+b(c)'],
  ['[x]', 'x'],
  ['x$', 'x'],
  ['main', 'main\n'],
  ['**/hot*', 'rel/1/hotfix'],
  ['fé*', 'fé/x'],
  ['fé*', 'féx'],
  ['***', 'a/b'],
  ['a**b', 'a/x/b'],
  ['*/*', 'a/b/c'],
  ['release/**/final', 'release/final'],
  // a pattern a backtracking matcher takes minutes over
  [`${'*a'.repeat(16)}*b`, 'a'.repeat(60)],
  [`${'*a'.repeat(16)}*b`, `${'a'.repeat(60)}b`],
];

const cases: [RuleShape[], RefUpdate, Pusher][] = [
  ...patterns.map(([pattern, name]): [RuleShape[], RefUpdate, Pusher] => [
    [rule({ pattern, push: 'owners' })],
    update({ name }),
    member,
  ]),
  [[rule()], update({ fastForward: false }), member],
  [[rule({ fast_forward_only: false })], update({ fastForward: false }), member],
  [[rule()], update({ new: null }), owner],
  [[rule({ allow_deletion: true })], update({ new: null }), owner],
  [[rule()], update({ old: null, fastForward: false }), member],
  [[rule({ push: 'owners' })], update(), owner],
  [[rule()], update(), outsider],
  [[rule({ push: { users: ['mia'] } })], update(), member],
  [[rule({ push: { users: ['mia', 'ola'] } })], update(), owner],
  [[rule({ push: { users: [] } })], update(), owner],
  [[rule({ pattern: '**', push: 'owners' })], update({ type: 'tag' }), member],
  [[rule({ pattern: '@' })], update({ name: '@', type: 'bookmark', fastForward: false }), member],
  [[rule({ pattern: 'ma*', fast_forward_only: false }), rule({ push: 'owners' })], update(), member],
];

describe('the Python copy of the protection rules (Mercurial workers)', () => {
  test('answers every case as rules.ts does', () => {
    const r = spawnSync(HG.python, [SCRIPT], { input: JSON.stringify(cases), encoding: 'utf8' });
    expect(r.stderr).toBe('');
    const expected = cases.map(([rules, u, p]) => refusal(rules, u, p) ?? null);
    expect(JSON.parse(r.stdout)).toEqual(expected);
    // the table exercises both outcomes
    expect(expected.filter((e) => e === null).length).toBeGreaterThan(3);
    expect(expected.filter((e) => e !== null).length).toBeGreaterThan(3);
  });
});
