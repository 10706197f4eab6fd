import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo } from '../helpers/factories.ts';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';
import { loadConfig } from '../../src/config.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

// Large content never answers 500, and diffs and blobs are capped (docs/api.md "Limits").
// Files are made and committed with the stock clients straight into the repository storage.

const MiB = 1024 * 1024;
/** 125,000 lines of 7 bytes ("000000\n"): 875,000 bytes; its "new file" diff is just under 1 MiB. */
const LINES = 125_000;
const linesText = (): string =>
  Array.from({ length: LINES }, (_, i) => `${String(i).padStart(6, '0')}\n`).join('');
/** 50 MiB of text lines (64 bytes each). */
const HUGE_SIZE = 50 * MiB;
function hugeText(): Buffer {
  const line = (i: number) => `${String(i).padStart(10, '0')} ${'x'.repeat(52)}\n`;
  const buf = Buffer.alloc(HUGE_SIZE);
  for (let i = 0, at = 0; at < HUGE_SIZE; i += 1) at += buf.write(line(i), at, 'latin1');
  return buf;
}

/** One working copy per repository; each `commit` writes files and lands them in the storage. */
class Work {
  readonly vcs: VcsKind;
  readonly store: string;
  dir = '';

  constructor(vcs: VcsKind, store: string) {
    this.vcs = vcs;
    this.store = store;
  }

  async open(): Promise<void> {
    this.dir = await tempDir(`triad-limits-${this.vcs}-`);
    if (this.vcs === 'git') await ok('git', ['init', '-q', '-b', 'main', '.'], this.dir);
    else if (this.vcs === 'hg') await ok('/usr/bin/hg', ['init', '.'], this.dir);
    else {
      await ok('fossil', ['open', '--force', this.store], this.dir);
      await ok('fossil', ['user', 'default', 'triad'], this.dir);
    }
  }

  async commit(files: Record<string, string | Buffer>, message: string): Promise<string> {
    for (const [rel, content] of Object.entries(files)) await writeFile(this.dir, rel, content);
    const d = this.dir;
    if (this.vcs === 'git') {
      await ok('git', ['add', '.'], d);
      await ok('git', ['commit', '-q', '-m', message], d);
      await ok('git', ['push', '-q', this.store, 'main'], d);
      return (await ok('git', ['rev-parse', 'HEAD'], d)).trim();
    }
    if (this.vcs === 'hg') {
      await ok('/usr/bin/hg', ['add', '-q'], d);
      await ok('/usr/bin/hg', ['commit', '-m', message], d);
      await ok('/usr/bin/hg', ['push', '-q', this.store], d);
      return (await ok('/usr/bin/hg', ['log', '-r', '.', '-T', '{node}'], d)).trim();
    }
    await ok('fossil', ['addremove'], d);
    await ok('fossil', ['commit', '--no-warnings', '-m', message], d);
    const out = await ok(
      'fossil',
      ['sql', "SELECT uuid FROM blob WHERE rid = (SELECT value FROM vvar WHERE name = 'checkout')"],
      d,
    );
    return out.replace(/'/g, '').trim();
  }

  /** Done committing: a Fossil checkout is closed before the server reads the repository. */
  async finish(): Promise<void> {
    if (this.vcs === 'fossil') await ok('fossil', ['close', '--force'], this.dir);
  }

  async remove(): Promise<void> {
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

async function repoOf(s: TestServer, owner: TestUser, org: string, vcs: VcsKind) {
  const repo = await newRepo(owner, org, { vcs });
  return { base: repo.api, store: s.running.services.repos.path(repo) };
}

type Fixture = { base: string; work: Work; ids: Record<string, string> };

/** Four commits: a 125,000-line file, two lines changed in it, five such files, a 50 MiB file. */
async function largeHistory(s: TestServer, owner: TestUser, org: string, vcs: VcsKind, huge: Buffer) {
  const repo = await repoOf(s, owner, org, vcs);
  const work = new Work(vcs, repo.store);
  await work.open();
  const ids: Record<string, string> = {};
  ids.lines = await work.commit({ 'lines.txt': linesText(), 'small.txt': 'small\n' }, 'add lines');
  const changed = linesText()
    .replace('\n050000\n', '\nchanged-050000\n')
    .replace('\n100000\n', '\nchanged-100000\n');
  ids.edit = await work.commit({ 'lines.txt': changed }, 'edit two lines');
  const five: Record<string, string> = {};
  for (const n of ['a', 'b', 'c', 'd', 'e']) five[`many/${n}.txt`] = linesText();
  ids.many = await work.commit(five, 'five large files');
  ids.huge = await work.commit({ 'huge.txt': huge, 'note.txt': 'note\n' }, 'a 50 MiB file');
  await work.finish();
  return { base: repo.base, work, ids };
}

describe('large content with the default limits', () => {
  const kinds: VcsKind[] = ['git', 'hg', 'fossil'];
  let s: TestServer;
  const fixtures = new Map<VcsKind, Fixture>();

  beforeAll(async () => {
    s = await startTestServer();
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    const huge = hugeText();
    // The three histories are made at once: most of the time goes to the clients' disk writes.
    const made = await Promise.all(kinds.map((vcs) => largeHistory(s, owner, org, vcs, huge)));
    made.forEach((f, i) => fixtures.set(kinds[i] ?? 'git', f));
  }, 180_000);
  afterAll(async () => {
    for (const f of fixtures.values()) await f.work.remove();
    await s.close();
  });

  describe.each(kinds)('%s', (vcs) => {
    let base: string;
    let ids: Record<string, string>;
    beforeAll(() => {
      const f = fixtures.get(vcs);
      if (f === undefined) throw new Error(`no ${vcs} fixture`);
      base = f.base;
      ids = f.ids;
    });

    test('a changeset adding a 125,000-line file answers its full diff', async () => {
      const r = await s.anon.get(`${base}/changeset/${ids.lines}`);
      expect(r.status).toBe(200);
      const c = r.body.data;
      expect(c.diff_truncated).toBe(false);
      expect(c.diff_truncated_files).toEqual([]);
      expect(c.diff).toContain('diff --git a/lines.txt b/lines.txt');
      expect(c.diff).toContain(`@@ -0,0 +1,${LINES} @@\n+000000\n+000001\n`);
      expect(c.diff).toContain('\n+124999\n');
      expect(c.diff).toContain('+small');
      expect(c.diff.split('\n').filter((l: string) => /^\+\d{6}$/.test(l)).length).toBe(LINES);
    });

    test('two changed lines in a 125,000-line file give two small hunks', async () => {
      const r = await s.anon.get(`${base}/changeset/${ids.edit}`);
      expect(r.status).toBe(200);
      const c = r.body.data;
      expect(c.diff_truncated).toBe(false);
      expect(c.diff).toContain('\n-050000\n+changed-050000\n');
      expect(c.diff).toContain('\n-100000\n+changed-100000\n');
      expect(c.diff.match(/^@@ /gm)).toHaveLength(2);
      expect(c.diff.length).toBeLessThan(2000);
    });

    test('a diff over the total cap stops before the section that would pass it', async () => {
      const r = await s.anon.get(`${base}/changeset/${ids.many}`);
      expect(r.status).toBe(200);
      const c = r.body.data;
      expect(c.diff_truncated).toBe(true);
      expect(c.diff_truncated_files).toEqual([]);
      for (const n of ['a', 'b', 'c', 'd']) expect(c.diff).toContain(`diff --git a/many/${n}.txt`);
      expect(c.diff).not.toContain('many/e.txt');
      expect(Buffer.byteLength(c.diff)).toBeLessThanOrEqual(4 * MiB);
    });

    test('a 50 MiB file in a changeset is shown by its header only', async () => {
      const r = await s.anon.get(`${base}/changeset/${ids.huge}`);
      expect(r.status).toBe(200);
      expect(r.text.length).toBeLessThan(10_000);
      const c = r.body.data;
      expect(c.diff_truncated).toBe(true);
      expect(c.diff_truncated_files).toEqual(['huge.txt']);
      expect(c.diff).toContain('diff --git a/huge.txt b/huge.txt\nnew file mode 100644\n');
      expect(c.diff).not.toContain('+++ b/huge.txt');
      expect(c.diff).toMatch(/\+\+\+ b\/note.txt\n@@ -0,0 \+1(,1)? @@\n\+note\n/);
    });

    test('a blob over the cap answers its first 4 MiB, flagged, with the full size', async () => {
      const r = await s.anon.get(`${base}/blob/huge.txt`);
      expect(r.status).toBe(200);
      // JSON escapes each newline as two characters: 65,536 lines of 64 bytes.
      expect(r.text.length).toBeLessThan(4 * MiB + 70_000);
      const b = r.body.data;
      expect(b).toMatchObject({ path: 'huge.txt', size: HUGE_SIZE, encoding: 'utf-8', truncated: true });
      expect(b.content.length).toBe(4 * MiB);
      expect(b.content).toBe(hugeText().toString('latin1', 0, 4 * MiB));
      const tree = await s.anon.get(`${base}/tree`);
      expect(tree.body.data).toContainEqual({ name: 'huge.txt', is_dir: false, size: HUGE_SIZE });
    });

    test('a blob under the cap is whole and not flagged', async () => {
      const r = await s.anon.get(`${base}/blob/lines.txt?rev=${ids.lines}`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual({
        path: 'lines.txt',
        content: linesText(),
        size: LINES * 7,
        encoding: 'utf-8',
        truncated: false,
      });
    });
  });
});

describe('the caps are configurable', () => {
  let s: TestServer;
  let base: string;
  let work: Work;
  let id: string;
  // 3-byte characters: a cut inside one must not turn the text into base64 or broken UTF-8.
  const text = `${'€'.repeat(700)}\n`;

  beforeAll(async () => {
    s = await startTestServer({
      TRIAD_BLOB_MAX_BYTES: '1kb',
      TRIAD_DIFF_MAX_FILE_BYTES: '600',
      TRIAD_DIFF_MAX_BYTES: '1000',
    });
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    const repo = await repoOf(s, owner, org, 'git');
    base = repo.base;
    work = new Work('git', repo.store);
    await work.open();
    id = await work.commit(
      {
        'a.txt': 'a\n'.repeat(100),
        'b.txt': 'b\n'.repeat(200),
        'c.txt': 'c\n',
        'd.txt': 'd\n'.repeat(100),
        'euro.txt': text,
      },
      'small files',
    );
    await work.finish();
  });
  afterAll(async () => {
    await work.remove();
    await s.close();
  });

  test('a blob is cut at a character boundary below the configured cap', async () => {
    const r = await s.anon.get(`${base}/blob/euro.txt`);
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      path: 'euro.txt',
      content: '€'.repeat(341),
      size: Buffer.byteLength(text),
      encoding: 'utf-8',
      truncated: true,
    });
  });

  test('per-file and total diff caps apply in path order', async () => {
    const r = await s.anon.get(`${base}/changeset/${id}`);
    expect(r.status).toBe(200);
    const c = r.body.data;
    // a.txt: a 421-byte section; b.txt: 721 bytes > 600, so its header only; c.txt: 120 bytes;
    // d.txt (421 more) would pass the 1000-byte total: it and everything after it are left out.
    expect(c.diff_truncated).toBe(true);
    expect(c.diff_truncated_files).toEqual(['b.txt']);
    expect(c.diff).toContain(`+++ b/a.txt\n@@ -0,0 +1,100 @@\n${'+a\n'.repeat(100)}`);
    expect(c.diff).toMatch(
      /diff --git a\/b.txt b\/b.txt\nnew file mode 100644\nindex 0{10}\.\.[0-9a-f]{10}\ndiff --git a\/c.txt/,
    );
    expect(c.diff).toContain('+++ b/c.txt\n@@ -0,0 +1 @@\n+c\n');
    expect(c.diff).not.toContain('d.txt');
    expect(c.diff).not.toContain('euro.txt');
    expect(Buffer.byteLength(c.diff)).toBe(421 + 77 + 120);
  });

  test('a bad size value stops the start with the variable named', () => {
    expect(() => loadConfig({ TRIAD_BLOB_MAX_BYTES: 'lots' })).toThrow(/TRIAD_BLOB_MAX_BYTES/);
    expect(() => loadConfig({ TRIAD_DIFF_MAX_BYTES: '0' })).toThrow(/TRIAD_DIFF_MAX_BYTES/);
    expect(loadConfig({}).limits).toEqual({
      blobMaxBytes: 4 * MiB,
      diffMaxFileBytes: MiB,
      diffMaxBytes: 4 * MiB,
    });
  });
});
