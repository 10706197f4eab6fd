import { describe, expect, test } from '@jest/globals';
import { unifiedHunks } from '../../src/vcs/diff.ts';

/**
 * The unified diff of the git and Fossil readers (Mercurial's extension makes its own). Each
 * case's expected text is what `diff -u` and `git diff` print for it.
 */
describe('unified diff hunks', () => {
  test.each([
    [
      'two lines replaced by one',
      'hello\nworld\n',
      'changed by a later commit\n',
      '@@ -1,2 +1 @@\n-hello\n-world\n+changed by a later commit\n',
    ],
    ['one line replaced by two', 'x\n', 'a\nb\n', '@@ -1 +1,2 @@\n-x\n+a\n+b\n'],
    ['three lines replaced by one', 'a\nb\nc\n', 'x\n', '@@ -1,3 +1 @@\n-a\n-b\n-c\n+x\n'],
    [
      'a line replaced between kept ones',
      'k\na\nb\nk2\n',
      'k\nx\nk2\n',
      '@@ -1,4 +1,3 @@\n k\n-a\n-b\n+x\n k2\n',
    ],
    ['one line replaced by one', 'a\n', 'c\n', '@@ -1 +1 @@\n-a\n+c\n'],
    ['a line removed', 'hello\nworld\n', 'hello\n', '@@ -1,2 +1 @@\n hello\n-world\n'],
  ])('when %s, then the hunk says so', (_what, before, after, expected) => {
    expect(unifiedHunks(before, after)).toBe(expected);
  });

  test('when random texts are compared, then the hunk rebuilds both sides and keeps as many lines as they share', () => {
    // a fixed pseudo-random sequence: the same cases in every run
    let seed = 12345;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const text = () => Array.from({ length: next(7) }, () => `${'abc'[next(3)]}\n`).join('');
    const lcs = (a: string[], b: string[]) => {
      const t = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
      for (let i = 1; i <= a.length; i++)
        for (let j = 1; j <= b.length; j++)
          t[i]![j] = a[i - 1] === b[j - 1] ? t[i - 1]![j - 1]! + 1 : Math.max(t[i - 1]![j]!, t[i]![j - 1]!);
      return t[a.length]![b.length]!;
    };
    for (let c = 0; c < 500; c++) {
      const before = text();
      const after = text();
      const hunk = unifiedHunks(before, after, 100);
      if (before === after) {
        expect(hunk).toBe('');
        continue;
      }
      const body = hunk.split('\n').slice(1, -1);
      const old = body.filter((l) => !l.startsWith('+')).map((l) => `${l.slice(1)}\n`);
      const neu = body.filter((l) => !l.startsWith('-')).map((l) => `${l.slice(1)}\n`);
      expect({ before, after, old: old.join(''), neu: neu.join('') }).toEqual({
        before,
        after,
        old: before,
        neu: after,
      });
      const lines = (s: string) => s.split('\n').slice(0, -1);
      expect(body.filter((l) => l.startsWith(' '))).toHaveLength(lcs(lines(before), lines(after)));
    }
  });
});
