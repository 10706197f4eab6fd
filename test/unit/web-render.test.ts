/**
 * The web's renderers on their own: highlighting (languages by file name, lines split with their
 * spans, names that are no language), markdown (raw HTML as text, links and images resolved in
 * the repository, foreign images as links, unsafe schemes refused) and the escaping template.
 */
import { describe, expect, test } from '@jest/globals';
import { highlightLines, languageOf, splitMarkup } from '../../src/web/highlight.ts';
import { renderMarkdown } from '../../src/web/markdown.ts';
import { html, trusted } from '../../src/web/html.ts';

describe('highlighting', () => {
  test('when a file is named like an object property, then it has no language and its page is plain text', async () => {
    for (const name of [
      'constructor',
      '__proto__',
      'x.constructor',
      'a.__proto__',
      'b.toString',
      'hasOwnProperty',
    ]) {
      expect({ name, lang: languageOf(name) }).toEqual({ name, lang: undefined });
    }
    expect(await highlightLines('src/x.constructor', 'a <b>\n')).toEqual({
      lines: ['a &lt;b&gt;'],
      highlighted: false,
    });
  });

  test('when a name or extension is known, then its language is used; unknown ones stay plain', () => {
    expect(languageOf('src/main.ts')).toBe('ts');
    expect(languageOf('Makefile')).toBe('makefile');
    expect(languageOf('include/x.h')).toBe('c');
    expect(languageOf('notes.unknown-ext')).toBeUndefined();
    expect(languageOf('README')).toBeUndefined();
  });

  test('when highlight.js markup spans lines, then each line closes and reopens its spans', () => {
    expect(splitMarkup('<span class="c">/* a\nb */</span>\nx')).toEqual([
      '<span class="c">/* a</span>',
      '<span class="c">b */</span>',
      'x',
    ]);
  });
});

describe('markdown', () => {
  const place = { org: 'o', repo: 'r', rev: 'main', dir: 'docs' };
  const render = (text: string) => renderMarkdown(text, place).text;

  test('when a README holds raw HTML, then it is shown as text', () => {
    const out = render('<script>alert(1)</script> <img src=x onerror=alert(1)>');
    expect(out).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(out).not.toContain('<script');
    expect(out).not.toContain('<img');
  });

  test('when links and images are relative, then they open the repository at the same revision', () => {
    const out = render('[guide](guide.md) [up](../src/) [root](/LICENSE) ![logo](img/logo.png)');
    expect(out).toContain('href="/o/r/-/blob/main/docs/guide.md"');
    expect(out).toContain('href="/o/r/-/tree/main/src"');
    expect(out).toContain('href="/o/r/-/blob/main/LICENSE"');
    expect(out).toContain('<img src="/o/r/-/raw/main/docs/img/logo.png" alt="logo">');
  });

  test('when an image is elsewhere or a link is unsafe, then no foreign image loads and no script link is made', () => {
    const out = render(
      '![ext](https://example.invalid/x.png) [x](javascript:alert(1)) ![y](javascript:alert(1))',
    );
    expect(out).toContain('<a class="external-image" href="https://example.invalid/x.png">ext</a>');
    expect(out).not.toMatch(/<img[^>]+example\.invalid/);
    expect(out).not.toContain('href="javascript:');
    expect(out).not.toContain('src="javascript:');
  });
});

describe('the template', () => {
  test('when values are interpolated, then they are escaped unless they are markup already', () => {
    const name = `"><script>alert(1)</script>`;
    expect(html`<a title="${name}">${name}</a>${trusted('<b>ok</b>')}${[1, '<i>', null, false]}`.text).toBe(
      '<a title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</a><b>ok</b>1&lt;i&gt;',
    );
  });
});
