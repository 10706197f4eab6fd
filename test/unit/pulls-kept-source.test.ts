import { describe, expect, test } from '@jest/globals';
import { keptSource } from '../../src/pulls/merge.ts';

/**
 * Which sources `delete_source` keeps: the default line of each kind (the merge itself goes
 * ahead). The integration tests (pulls-merge.test.ts) delete and keep real refs of all three kinds.
 */
describe('keptSource', () => {
  test.each([
    ['git', 'main', 'main'],
    ['fossil', 'trunk', 'trunk'],
    ['hg', 'default', '@'],
    ['hg', 'default', 'default'],
  ] as const)('a %s repository (default %s) keeps %s', (vcs, defaultBranch, ref) => {
    expect(keptSource({ vcs, defaultBranch }, ref)).toBeDefined();
  });

  test.each([
    ['git', 'main', 'feature'],
    ['git', 'main', '@'],
    ['fossil', 'trunk', 'feature'],
    ['hg', 'default', 'feature'],
    ['hg', 'default', 'main'],
  ] as const)('a %s repository (default %s) may delete %s', (vcs, defaultBranch, ref) => {
    expect(keptSource({ vcs, defaultBranch }, ref)).toBeUndefined();
  });
});
