import { describe, expect, test } from '@jest/globals';
import {
  firstRefusal,
  matches,
  refusal,
  type RefUpdate,
  type RuleShape,
} from '../../src/protection/rules.ts';

const rule = (over: Partial<RuleShape> = {}): RuleShape => ({
  pattern: 'main',
  fast_forward_only: true,
  allow_deletion: false,
  push: 'members',
  ...over,
});
const move = (over: Partial<RefUpdate> = {}): RefUpdate => ({
  name: 'main',
  type: 'branch',
  old: 'a',
  new: 'b',
  fastForward: true,
  ...over,
});
const member = { username: 'mia', role: 'member' as const };
const owner = { username: 'olga', role: 'owner' as const };
const outsider = { username: 'zed', role: undefined };

describe('protection patterns', () => {
  test.each([
    ['main', 'main', true],
    ['main', 'main2', false],
    ['release/*', 'release/1.0', true],
    ['release/*', 'release/1.0/hotfix', false],
    ['release/**', 'release/1.0/hotfix', true],
    ['**', 'any/thing', true],
    ['*', 'feature/x', false],
    ['@', '@', true],
    ['v1.*', 'v1x2', false],
    ['v1.*', 'v1.2', true],
    ['***', 'a/b', true],
    ['*/*', 'a/b/c', false],
    ['release/**/final', 'release/x/y/final', true],
    // a pattern a backtracking regular expression takes minutes over
    [`${'*a'.repeat(16)}*b`, 'a'.repeat(60), false],
    [`${'*a'.repeat(16)}*b`, `${'a'.repeat(60)}b`, true],
  ])('%s against %s: %s', (pattern, name, expected) => {
    expect(matches(pattern, name)).toBe(expected);
  });
});

describe('what a rule refuses', () => {
  test('a rewrite of a fast-forward-only branch, naming the pattern and the reason', () => {
    expect(refusal([rule()], move({ fastForward: false }), member)).toBe(
      'branch main is protected by rule "main": only fast-forward updates are allowed (this would rewrite its history)',
    );
    expect(
      refusal([rule({ fast_forward_only: false })], move({ fastForward: false }), member),
    ).toBeUndefined();
  });

  test('a deletion unless the rule allows it', () => {
    expect(refusal([rule()], move({ new: null }), owner)).toBe(
      'branch main is protected by rule "main": it cannot be deleted',
    );
    expect(refusal([rule({ allow_deletion: true })], move({ new: null }), owner)).toBeUndefined();
  });

  test('who may push: owners, members, or the users named', () => {
    expect(refusal([rule({ push: 'owners' })], move(), member)).toMatch(/only organization owners/);
    expect(refusal([rule({ push: 'owners' })], move(), owner)).toBeUndefined();
    expect(refusal([rule()], move(), outsider)).toMatch(/only organization members/);
    expect(refusal([rule({ push: { users: ['mia'] } })], move(), member)).toBeUndefined();
    expect(refusal([rule({ push: { users: ['mia'] } })], move(), owner)).toMatch(/only mia may push/);
  });

  test('tags and unmatched names are not protected; every matching rule applies', () => {
    expect(refusal([rule({ pattern: '**', push: 'owners' })], move({ type: 'tag' }), member)).toBeUndefined();
    expect(refusal([rule({ pattern: 'dev' })], move({ fastForward: false }), member)).toBeUndefined();
    const two = [rule({ pattern: 'ma*', fast_forward_only: false }), rule({ push: 'owners' })];
    expect(firstRefusal(two, [move({ name: 'feature' }), move()], member)).toMatch(
      /rule "main": only organization owners/,
    );
  });
});
