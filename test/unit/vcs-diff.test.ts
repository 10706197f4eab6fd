import { describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { unifiedHunks } from '../../src/vcs/diff.ts';

/** A fixed pseudo-random sequence (the same cases in every run) of short texts from `words`. */
function texts(seed: number, words: string[]): () => string {
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  return () => {
    const t = Array.from({ length: next(7) }, () => `${words[next(words.length)]}\n`).join('');
    // one text in three without its last newline
    return next(3) === 0 && t !== '' ? t.slice(0, -1) : t;
  };
}

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

  test.each([
    [
      'a last line gains its newline',
      'a\nb',
      'a\nb\n',
      '@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n',
    ],
    [
      'the new text ends without one on a line the old had earlier',
      'c\na\nc\na\n',
      'c\na',
      '@@ -1,4 +1,2 @@\n c\n-a\n-c\n-a\n+a\n\\ No newline at end of file\n',
    ],
  ])('when %s, then the line without a newline is marked', (_what, before, after, expected) => {
    expect(unifiedHunks(before, after)).toBe(expected);
  });

  test('when random texts are compared, then the hunk rebuilds both sides and keeps as many lines as they share', () => {
    const text = texts(12345, ['a', 'b', 'c']);
    // a last line without its newline is a line of its own
    const lines = (t: string) =>
      t === '' ? [] : (t.endsWith('\n') ? t.slice(0, -1) : `${t}\u0000`).split('\n');
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
      let old = '';
      let neu = '';
      let kept = 0;
      let last = '';
      for (const l of hunk.split('\n').slice(1, -1)) {
        if (l === '\\ No newline at end of file') {
          if (last !== '+') old = old.slice(0, -1);
          if (last !== '-') neu = neu.slice(0, -1);
          continue;
        }
        last = l[0] ?? '';
        if (last === ' ') kept += 1;
        if (last !== '+') old += `${l.slice(1)}\n`;
        if (last !== '-') neu += `${l.slice(1)}\n`;
      }
      expect({ before, after, old, neu }).toEqual({ before, after, old: before, neu: after });
      expect(kept).toBe(lcs(lines(before), lines(after)));
    }
  });

  test('when random texts are compared, then the hunks are the ones git diff prints', () => {
    const text = texts(4242, ['alpha', 'beta', 'gamma', 'delta']);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'triad-diff-'));
    try {
      const [a, b] = [path.join(dir, 'a'), path.join(dir, 'b')];
      for (let c = 0; c < 150; c++) {
        const before = text();
        const after = text();
        if (before === after) continue;
        fs.writeFileSync(a, before);
        fs.writeFileSync(b, after);
        let out = '';
        try {
          execFileSync('git', ['diff', '--no-index', '--no-color', '--diff-algorithm=myers', a, b]);
        } catch (e) {
          out = String((e as { stdout: Buffer }).stdout); // exit 1: the files differ
        }
        expect({ before, after, hunk: unifiedHunks(before, after) }).toEqual({
          before,
          after,
          // (git adds the nearest "function" line after a hunk's range; Triad shows none)
          hunk: out.slice(out.indexOf('@@')).replace(/^(@@ [^@]* @@).*$/gm, '$1'),
        });
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
