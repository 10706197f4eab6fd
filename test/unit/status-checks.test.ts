import { describe, expect, test } from '@jest/globals';
import { checksOf, mergeBlock, requiredContexts, type CheckRule } from '../../src/statuses/checks.ts';
import { mergeRefusal, sourceKeptBy } from '../../src/protection/merges.ts';

const rule = (pattern: string, over: Partial<CheckRule> = {}): CheckRule => ({
  pattern,
  require_pipeline: false,
  required_contexts: [],
  ...over,
});
const st = (context: string, state: 'pending' | 'success' | 'failure' | 'error') => ({
  context,
  state,
  target_url: null,
});

describe('required contexts', () => {
  test('every matching rule adds its contexts, the pipeline first, each once', () => {
    const rules = [
      rule('release/*', { required_contexts: ['ext/a'] }),
      rule('release/**', { require_pipeline: true, required_contexts: ['ext/b', 'ext/a'] }),
      rule('main', { required_contexts: ['ext/main'] }),
    ];
    expect(requiredContexts(rules, 'release/1.0')).toEqual(['ext/a', 'triad/pipeline', 'ext/b']);
    expect(requiredContexts(rules, 'release/1/2')).toEqual(['triad/pipeline', 'ext/b', 'ext/a']);
    expect(requiredContexts(rules, 'feature')).toEqual([]);
  });

  test("a merge into Mercurial's @ waits for the rules on the default branch too", () => {
    const rules = [rule('default', { require_pipeline: true }), rule('@', { required_contexts: ['ext/a'] })];
    expect(requiredContexts(rules, '@')).toEqual(['triad/pipeline', 'ext/a']);
    expect(requiredContexts(rules, 'default')).toEqual(['triad/pipeline']);
  });
});

describe('checks and the merge gate', () => {
  test('none, pending, failure and success', () => {
    expect(checksOf([], [])).toEqual({ state: 'none', contexts: [] });
    expect(checksOf(['a'], []).state).toBe('pending');
    expect(checksOf(['a'], [st('a', 'success'), st('z', 'pending')]).state).toBe('pending');
    expect(checksOf(['a'], [st('a', 'error')]).state).toBe('failure');
    expect(checksOf([], [st('b', 'success'), st('a', 'success')])).toEqual({
      state: 'success',
      contexts: [
        { context: 'a', state: 'success', target_url: null },
        { context: 'b', state: 'success', target_url: null },
      ],
    });
  });

  test('only required contexts gate: missing or pending wait, failure or error fail', () => {
    expect(mergeBlock(['a'], [])?.code).toBe('checks_pending');
    expect(mergeBlock(['a'], [st('a', 'pending')])?.code).toBe('checks_pending');
    expect(mergeBlock(['a', 'b'], [st('a', 'error')])?.code).toBe('checks_failed');
    expect(mergeBlock(['a'], [st('a', 'success'), st('other', 'failure')])).toBeUndefined();
    expect(mergeBlock([], [st('other', 'failure')])).toBeUndefined();
  });
});

describe('protected refs and merges', () => {
  const owners = {
    pattern: 'default',
    fast_forward_only: true,
    allow_deletion: false,
    push: 'owners' as const,
  };
  const member = { username: 'mia', role: 'member' as const };
  test("a rule on Mercurial's default branch binds a merge into @", () => {
    expect(mergeRefusal([owners], 'bookmark', '@', member)).toMatch(
      /branch default is protected by rule "default"/,
    );
    expect(mergeRefusal([owners], 'bookmark', 'feature', member)).toBeUndefined();
  });

  test('delete_source keeps any source a rule protects, even one whose rule allows deletion', () => {
    const deletable = { ...owners, pattern: 'topic/*', allow_deletion: true, push: 'members' as const };
    expect(sourceKeptBy([deletable], 'branch', 'topic/x', member)).toMatch(/protected by rule "topic\/\*"/);
    expect(sourceKeptBy([deletable], 'branch', 'feature', member)).toBeUndefined();
  });
});
