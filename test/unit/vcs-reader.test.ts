import { afterAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BadPath, blobContent, normalisePath } from '../../src/vcs/reader.ts';
import { PersistentProcess, Respawning, type Parser } from '../../src/vcs/process/process.ts';
import { unifiedHunks } from '../../src/vcs/diff.ts';

describe('normalisePath', () => {
  test('drops empty and "." segments and joins URL segments', () => {
    expect(normalisePath(undefined)).toBe('');
    expect(normalisePath([])).toBe('');
    expect(normalisePath(['src', '', '.', 'lib'])).toBe('src/lib');
    expect(normalisePath('a//b/./c')).toBe('a/b/c');
    expect(normalisePath(['a b', 'ü.txt'])).toBe('a b/ü.txt');
  });

  test.each([
    ['..'],
    ['a/../../etc/passwd'],
    ['../etc'],
    ['/etc/passwd'],
    ['a\u0000b'],
    ['a\\..\\b'],
    ['a\nb'],
  ])('rejects %j', (p) => {
    expect(() => normalisePath(p)).toThrow(BadPath);
    expect(() => normalisePath(p.split('/'))).toThrow(BadPath);
  });

  test('a segment that decoded to "../x" is still caught', () => {
    expect(() => normalisePath(['src', '../../etc'])).toThrow(BadPath);
  });
});

describe('blobContent', () => {
  test('utf-8 text stays text; NUL or invalid UTF-8 is base64', () => {
    expect(blobContent('a', Buffer.from('héllo\n'))).toEqual({
      path: 'a',
      content: 'héllo\n',
      size: 7,
      encoding: 'utf-8',
      truncated: false,
    });
    expect(blobContent('b', Buffer.from([0x61, 0x00])).encoding).toBe('base64');
    expect(blobContent('c', Buffer.from([0xff, 0xfe])).content).toBe('//4=');
    expect(blobContent('d', Buffer.alloc(0)).encoding).toBe('utf-8');
  });
});

describe('unifiedHunks', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'triad-udiff-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  /** The hunks `diff -u` prints for the same two texts (headers removed). */
  const gnu = (a: string, b: string): string => {
    fs.writeFileSync(path.join(tmp, 'a'), a);
    fs.writeFileSync(path.join(tmp, 'b'), b);
    try {
      execFileSync('diff', ['-u', 'a', 'b'], { cwd: tmp });
      return '';
    } catch (e) {
      const out = String((e as { stdout: Buffer }).stdout);
      return out.split('\n').slice(2).join('\n');
    }
  };
  const lines = (n: number, f: (i: number) => string) =>
    Array.from({ length: n }, (_, i) => `${f(i)}\n`).join('');

  test.each([
    ['equal', 'a\nb\n', 'a\nb\n'],
    ['add to empty', '', 'x\ny\n'],
    ['delete all', 'x\ny\n', ''],
    ['one change', 'a\nb\nc\n', 'a\nB\nc\n'],
    ['two hunks', lines(40, (i) => `l${i}`), lines(40, (i) => (i === 3 || i === 30 ? `X${i}` : `l${i}`))],
    [
      'close changes merge',
      lines(20, (i) => `l${i}`),
      lines(20, (i) => (i === 5 || i === 10 ? `X${i}` : `l${i}`)),
    ],
    ['insert middle', lines(10, (i) => `l${i}`), lines(10, (i) => (i === 5 ? 'new\nl5' : `l${i}`))],
    ['no final newline', 'a\nb', 'a\nb\n'],
    ['no final newline both', 'a\nb', 'a\nc'],
  ])('%s matches diff -u', (_name, a, b) => {
    expect(unifiedHunks(a, b)).toBe(gnu(a, b));
  });
});

describe('persistent processes', () => {
  const line: Parser<string> = (buf) => {
    const nl = buf.indexOf(10);
    return nl < 0 ? undefined : { value: buf.toString('utf8', 0, nl), used: nl + 1 };
  };

  test('requests are answered in order on one process', async () => {
    const p = new PersistentProcess('cat', [], {});
    const answers = await Promise.all(['a', 'b', 'c'].map((x) => p.request(`${x}\n`, line)));
    expect(answers).toEqual(['a', 'b', 'c']);
    p.close();
  });

  test('a crashed process is replaced transparently', async () => {
    const r = new Respawning(() => new PersistentProcess('cat', [], {}));
    expect(await r.run((p) => p.request('one\n', line))).toBe('one');
    const first = r.get();
    first.kill();
    await new Promise((res) => setTimeout(res, 50));
    expect(await r.run((p) => p.request('two\n', line))).toBe('two');
    expect(r.get()).not.toBe(first);
    r.close();
  });
});

describe('large inputs', () => {
  test('a 125,000-line file added or replaced diffs without overflowing the stack', () => {
    const big = Array.from({ length: 125_000 }, (_, i) => `${i}\n`).join('');
    const added = unifiedHunks('', big);
    expect(added.startsWith('@@ -0,0 +1,125000 @@\n+0\n+1\n')).toBe(true);
    expect(added.split('\n')).toHaveLength(125_002);
    const replaced = unifiedHunks(big, big.replace(/\n/g, 'x\n'));
    expect(replaced.split('\n').filter((l) => l.startsWith('-'))).toHaveLength(125_000);
  });
});
