import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';

/**
 * The README and docs/ must explain the project by themselves: every link stays inside the
 * repository and resolves (file, and heading anchor in a Markdown file); only a server on this
 * machine (http://localhost) may be linked by URL.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** Linked documents that another branch is adding; remove an entry once the file is merged. */
const ALLOWED_MISSING = new Set<string>([]);

/** The Markdown text without fenced code blocks and inline code spans (links there are not links). */
function prose(markdown: string): string {
  const lines: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m !== null) {
      if (fence === undefined) fence = m[1]![0]!.repeat(m[1]!.length);
      else if (line.trim().startsWith(fence)) fence = undefined;
      lines.push('');
      continue;
    }
    lines.push(fence === undefined ? line.replace(/(`+)[^`]*?\1/g, '') : '');
  }
  return lines.join('\n');
}

/** GitHub's anchor of a heading: its text, lowercased, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .replace(/\*+/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown file offers: its headings (repeats get -1, -2, ...) and HTML ids. */
function anchors(file: string): Set<string> {
  const text = fs.readFileSync(file, 'utf8');
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*(`{3,}|~{3,})/.test(line)) fence = !fence;
    if (fence) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h === null) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

/** Every link target of a Markdown text: inline links and images, autolinks, reference definitions. */
function targets(markdown: string): string[] {
  const text = prose(markdown);
  const out: string[] = [];
  for (const m of text.matchAll(/!?\[(?:[^\][]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g))
    out.push(m[1]!);
  for (const m of text.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]*)>/gi)) out.push(m[1]!);
  for (const m of text.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) out.push(m[1]!);
  return out;
}

/** The problems of one Markdown file's links, as `target: reason`. */
function linkProblems(file: string, root: string, allowedMissing = new Set<string>()): string[] {
  const problems: string[] = [];
  for (const target of targets(fs.readFileSync(file, 'utf8'))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      if (!/^https?:\/\/(localhost|127\.0\.0\.1)([:/]|$)/i.test(target))
        problems.push(`${target}: points outside the repository`);
      continue;
    }
    if (target === '') {
      problems.push('(empty): a link without a target');
      continue;
    }
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
    const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    if (pathPart.startsWith('/')) {
      problems.push(`${target}: an absolute path; link relative to the file`);
      continue;
    }
    const resolved = pathPart === '' ? file : path.resolve(path.dirname(file), pathPart);
    const rel = path.relative(root, resolved);
    if (rel.startsWith('..') || path.isAbsolute(rel)) {
      problems.push(`${target}: points outside the repository`);
      continue;
    }
    if (!fs.existsSync(resolved)) {
      if (!allowedMissing.has(rel.split(path.sep).join('/'))) problems.push(`${target}: no such file`);
      continue;
    }
    if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
      problems.push(`${target}: no heading with the anchor #${anchor} in ${rel}`);
  }
  return problems;
}

const documents = [
  'README.md',
  ...fs
    .readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('documentation links', () => {
  test.each(documents)('every link of %s stays in the repository and resolves', (doc) => {
    expect(linkProblems(path.join(ROOT, doc), ROOT, ALLOWED_MISSING)).toEqual([]);
  });

  test('the README links every document of docs/', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const missing = documents
      .filter((d) => d.startsWith('docs/'))
      .filter((d) => !readme.includes(`(${d})`) && !readme.includes(`(${d}#`));
    expect(missing).toEqual([]);
  });
});

describe('the link checker', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'triad-docs-links-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('reports broken, outside and anchorless links, and accepts good ones', () => {
    fs.mkdirSync(path.join(dir, 'docs'));
    fs.writeFileSync(
      path.join(dir, 'docs', 'a.md'),
      '# A page\n\n## The `kubernetes` executor (and why)\n\n## Twice\n\n## Twice\n',
    );
    fs.writeFileSync(
      path.join(dir, 'README.md'),
      [
        '# Readme',
        '',
        '[ok](docs/a.md) [ok](docs/a.md#the-kubernetes-executor-and-why) [ok](docs/a.md#twice-1)',
        '[ok](#readme) <http://localhost:3000> [ok](docs/)',
        '[broken](docs/b.md) [anchor](docs/a.md#nowhere) [up](../shared/spec.md)',
        '[web](https://example.com/x) [abs](/etc/passwd) [later](docs/later.md)',
        '',
        '`[code](docs/missing.md)`',
        '```',
        '[code](docs/missing.md)',
        '```',
        '[ref]: docs/gone.md',
      ].join('\n'),
    );
    expect(linkProblems(path.join(dir, 'README.md'), dir, new Set(['docs/later.md']))).toEqual([
      'docs/b.md: no such file',
      'docs/a.md#nowhere: no heading with the anchor #nowhere in docs/a.md',
      '../shared/spec.md: points outside the repository',
      'https://example.com/x: points outside the repository',
      '/etc/passwd: an absolute path; link relative to the file',
      'docs/gone.md: no such file',
    ]);
  });
});
