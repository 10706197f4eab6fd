import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import type { VcsKind } from '../../src/vcs/index.ts';
import { RefNotFound } from '../../src/vcs/ops.ts';
import { BOB, fossilSql, hgIn, OPS_BASE, opsSuite, type Files, type Fixture } from '../helpers/vcs-ops.ts';
import { ok } from '../helpers/vcs.ts';

/**
 * The operations behind pull requests, the same cases for each kind; what only one kind has is
 * in vcs-ops-{git,hg,fossil}.test.ts.
 */

type Case = {
  kind: VcsKind;
  initial: Files;
  main: string;
  /** What resolveRef answers. */
  heads: string;
  id: RegExp;
  /** Names that resolve to nothing; `unresolved` is asked along with the mainline. */
  hostile: string[];
  unresolved: string;
  /** checkMerge(source, target) refused with RefNotFound, or with an error matching the object. */
  refused: [string, string, typeof RefNotFound | Record<string, string>][];
  conflict: { what: string; target: Files; source: Files; files: string[] };
  binary: { file: string; target: string; source: string };
  /** Names `rev` as `name` on the server (git branch, hg bookmark); Fossil: vcs-ops-fossil.test.ts. */
  refAt?: (fx: Fixture, name: string, rev: string) => Promise<unknown>;
  /** BOB as `fx.author` prints him on a commit Triad made. */
  author: string;
  deletes: string;
  notARef: string;
  /** Commit ids that name nothing for isAncestor: an unknown one, a hostile one. */
  notCommits: [string, string];
};

const CONTENT_AND_DELETE = {
  what: 'content and modify/delete',
  target: { 'a.txt': '1\nTARGET\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': null, 'c.txt': 'c1\nc2\nT\n' },
  source: { 'a.txt': '1\nSOURCE\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': 'changed\n', 'c.txt': 'S\nc2\nc3\n' },
  files: ['a.txt', 'b.txt'],
};

const CASES: Case[] = [
  {
    kind: 'git',
    initial: OPS_BASE,
    main: 'main',
    heads: 'branch heads',
    id: /^[0-9a-f]{40}$/,
    hostile: [
      '-x',
      '--upload-pack=touch pwned',
      'main^',
      'main~1',
      'HEAD',
      ':/initial',
      'main@{0}',
      '',
      'a..b',
      'refs/heads/main',
      ' main',
    ],
    unresolved: 'main~1',
    refused: [
      ['--help', 'main', RefNotFound],
      ['main', 'nope', { role: 'target', ref: 'nope' }],
    ],
    conflict: CONTENT_AND_DELETE,
    binary: { file: 'img.bin', target: '\u0000target', source: '\u0000source' },
    refAt: (fx, name, rev) => ok('git', ['-C', fx.srv, 'branch', name, rev], fx.root),
    author: 'Bob Builder <bob@example.test>|Bob Builder <bob@example.test>',
    deletes: 'removes a branch',
    notARef: '-d',
    notCommits: ['0'.repeat(40), '--all'],
  },
  {
    kind: 'hg',
    initial: OPS_BASE,
    main: '@',
    heads: 'bookmarks (also @)',
    id: /^[0-9a-f]{40}$/,
    // (a named branch, `default` included, names its head: vcs-ops-hg-targets.test.ts)
    hostile: ['tip', '0', '.', 'null', 'all()', '@ or all()', 'literal:@', '-x', '--config=x', ' @', ''],
    unresolved: '@ or all()',
    refused: [
      ['all()', '@', { role: 'source', ref: 'all()' }],
      ['@', 'tip', RefNotFound],
    ],
    conflict: CONTENT_AND_DELETE,
    binary: {
      file: 'img.bin',
      target: Buffer.from([0, 1, 2, 3]).toString('latin1'),
      source: Buffer.from([0, 9, 9, 9]).toString('latin1'),
    },
    refAt: (fx, name, rev) => hgIn(fx, 'srv', 'bookmark', '-r', rev, name),
    author: 'Bob Builder <bob@example.test>|public',
    deletes: 'removes a bookmark',
    notARef: 'all()',
    notCommits: ['f'.repeat(40), 'all()'],
  },
  {
    kind: 'fossil',
    initial: { ...OPS_BASE, 'logo.bin': '\u0000base' },
    main: 'trunk',
    heads: 'branch heads',
    id: /^[0-9a-f]{64}$/,
    hostile: [
      "trunk' OR '1'='1",
      "'; DROP TABLE blob; --",
      'tip',
      'current',
      '-R',
      'root:trunk',
      ' trunk',
      '',
    ],
    unresolved: "trunk' OR '1'='1",
    refused: [
      ["x' OR 1=1 --", 'trunk', { role: 'source' }],
      ['trunk', 'nope', RefNotFound],
    ],
    conflict: {
      what: 'text and binary',
      target: {
        'a.txt': '1\nTARGET\n3\n4\n5\n6\n7\n8\n9\n',
        'c.txt': 'c1\nc2\nT\n',
        'img.bin': '\u0000target',
      },
      source: {
        'a.txt': '1\nSOURCE\n3\n4\n5\n6\n7\n8\n9\n',
        'c.txt': 'S\nc2\nc3\n',
        'img.bin': '\u0000source',
      },
      files: ['a.txt', 'img.bin'],
    },
    binary: { file: 'logo.bin', target: '\u0000target', source: '\u0000source' },
    author: 'Bob Builder',
    deletes: 'closes the branch',
    notARef: "s-del' OR 1=1 --",
    notCommits: ['0'.repeat(64), "' OR 1=1 --"],
  },
];

describe.each(CASES)('$kind operations', (K) => {
  const c = opsSuite(K.kind, K.initial);
  const merge = (source: string, target: string, style: 'merge' | 'squash' | 'ff-only', more = {}) =>
    c.ops.merge(c.fx.srv, { source, target, style, author: BOB, ...more });

  test(`resolveRef answers ${K.heads}; unknown and hostile names name nothing`, async () => {
    const { fx, ops, base } = c;
    expect(base).toMatch(K.id);
    expect(await ops.resolveRef(fx.srv, 'nope')).toBeUndefined();
    // several at once, in order (one process for git and Fossil)
    expect(await ops.resolveRefs(fx.srv, [K.main, 'nope', K.unresolved, K.main])).toEqual([
      base,
      undefined,
      undefined,
      base,
    ]);
    for (const name of K.hostile) expect(await ops.resolveRef(fx.srv, name)).toBeUndefined();
    for (const [source, target, refusal] of K.refused) {
      const check = ops.checkMerge(fx.srv, source, target);
      if (typeof refusal === 'function') await expect(check).rejects.toThrow(refusal);
      else await expect(check).rejects.toMatchObject(refusal);
    }
    if (K.kind === 'fossil') expect(await fossilSql(fx, 'select count(*) from blob')).not.toBe('0');
  });

  test('clean: diverged on different files, with counts; a push between checks is seen', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-clean');
    await fx.commit('s-clean', base, { 'c.txt': 'c1\nsource\nc3\n' });
    const s2 = await fx.commit('s-clean', 's-clean', { 'd.txt': 'new\n' });
    const s = await fx.commit('s-clean', 's-clean', { 'e.txt': 'e\n' });
    expect(await ops.checkMerge(fx.srv, 's-clean', 't-clean')).toEqual({
      state: 'clean',
      conflictedFiles: [],
      commitsAhead: 3,
      commitsBehind: 1,
      sourceHead: s,
      targetHead: t,
    });
    expect(await ops.resolveRef(fx.srv, 's-clean')).toBe(s);
    expect(s2).not.toBe(s);
    const t2 = await fx.commit('t-clean', 't-clean', { 'x.txt': 'x\n' });
    expect(await ops.checkMerge(fx.srv, 's-clean', 't-clean')).toMatchObject({
      commitsBehind: 2,
      targetHead: t2,
    });
  });

  const noCheckout = K.kind === 'fossil' ? '; no check-out is left' : '';
  test(`conflict lists the paths (${K.conflict.what}) and changes nothing${noCheckout}`, async () => {
    const { fx, ops, base } = c;
    await c.line('t-conf', K.conflict.target);
    await fx.commit('s-conf', base, K.conflict.source);
    const before = await fx.state();
    const check = await ops.checkMerge(fx.srv, 's-conf', 't-conf');
    expect(check.state).toBe('conflict');
    expect(check.conflictedFiles).toEqual(K.conflict.files);
    expect([check.commitsAhead, check.commitsBehind]).toEqual([1, 1]);
    const m = await merge('s-conf', 't-conf', 'merge');
    expect(m).toEqual({ kind: 'conflict', conflictedFiles: K.conflict.files });
    expect(await merge('s-conf', 't-conf', 'squash')).toEqual(m);
    expect(await fx.state()).toBe(before);
    if (K.kind === 'fossil') {
      expect(await fs.readdir(fx.tmp)).toEqual([]);
      // only the test's own check-out is registered in the repository
      expect(await fossilSql(fx, "select count(*) from config where name like 'ckout:%'")).toBe('1');
    }
  });

  test('binary files changed on both sides conflict', async () => {
    const { file, target, source } = K.binary;
    await c.line('t-bin', { [file]: target });
    await c.fx.commit('s-bin', c.base, { [file]: source });
    expect(await c.ops.checkMerge(c.fx.srv, 's-bin', 't-bin')).toMatchObject({
      state: 'conflict',
      conflictedFiles: [file],
    });
  });

  const refAt = K.refAt;
  if (refAt !== undefined) {
    test('behind: the source is already contained in the target; merging it is nothing to merge', async () => {
      const { fx, ops } = c;
      const t = await c.line('t-behind');
      await fx.commit('t-behind', 't-behind', { 'x.txt': 'x\n' });
      await refAt(fx, 's-behind', t);
      expect(await ops.checkMerge(fx.srv, 's-behind', 't-behind')).toMatchObject({
        state: 'behind',
        commitsAhead: 0,
        commitsBehind: 1,
        conflictedFiles: [],
      });
      const before = await fx.state();
      expect(await merge('s-behind', 't-behind', 'merge')).toEqual({ kind: 'nothing_to_merge' });
      expect(await fx.state()).toBe(before);
    });
  }

  test('empty: the source makes a change the target already has', async () => {
    await c.line('t-empty', { 'a.txt': 'same change\n' });
    await c.fx.commit('s-empty', c.base, { 'a.txt': 'same change\n' }, 'same change elsewhere');
    expect(await c.ops.checkMerge(c.fx.srv, 's-empty', 't-empty')).toMatchObject({
      state: 'empty',
      commitsAhead: 1,
      commitsBehind: 1,
    });
    // a squash of nothing is refused; a merge still records the history
    expect(await merge('s-empty', 't-empty', 'squash')).toEqual({ kind: 'nothing_to_merge' });
    expect(await merge('s-empty', 't-empty', 'merge')).toMatchObject({ kind: 'merged', fastForward: false });
  });

  // Fossil records a merge check-in instead: vcs-ops-fossil.test.ts
  if (K.kind !== 'fossil') {
    test('merge fast-forwards a target that has not diverged; ff-only too', async () => {
      const { fx, ops } = c;
      const t = await c.line('t-ff');
      const s1 = await fx.commit('s-ff', t, { 'f.txt': 'f\n' });
      expect(await ops.checkMerge(fx.srv, 's-ff', 't-ff')).toMatchObject({
        state: 'clean',
        commitsAhead: 1,
        commitsBehind: 0,
      });
      const m = await merge('s-ff', 't-ff', 'merge', { expectedHead: s1, expectedTargetHead: t });
      expect(m).toEqual({ kind: 'merged', mergeCommit: s1, fastForward: true });
      expect(await ops.resolveRef(fx.srv, 't-ff')).toBe(s1);
      const s2 = await fx.commit('s-ff', 's-ff', { 'f.txt': 'f2\n' });
      expect(await merge('s-ff', 't-ff', 'ff-only')).toEqual({
        kind: 'merged',
        mergeCommit: s2,
        fastForward: true,
      });
    });
  }

  test('merge of a diverged target: a merge commit with two parents by the given author', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-merge');
    const s = await fx.commit('s-merge', base, { 'c.txt': 'c1\nc2\nc3\nmore\n' });
    const m = await merge('s-merge', 't-merge', 'merge', { message: 'Merge PR #1' });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(m.fastForward).toBe(false);
    expect(await ops.resolveRef(fx.srv, 't-merge')).toBe(m.mergeCommit);
    expect(await fx.parents(m.mergeCommit)).toEqual([t, s]);
    expect(await fx.author(m.mergeCommit)).toBe(K.author);
    expect(await fx.message(m.mergeCommit)).toBe('Merge PR #1');
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nmore\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-merge\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(true);
    // the source line stays where it was
    expect(await ops.resolveRef(fx.srv, 's-merge')).toBe(s);
    if (K.kind === 'fossil') {
      expect(await fossilSql(fx, `select count(*) from config where name like 'ckout:%'`)).toBe('1');
    }
  });

  test('ff-only refuses a diverged target and changes nothing', async () => {
    await c.line('t-ffo');
    await c.fx.commit('s-ffo', c.base, { 'c.txt': 'other\n' });
    const before = await c.fx.state();
    expect(await merge('s-ffo', 't-ffo', 'ff-only')).toEqual({ kind: 'not_fast_forward' });
    expect(await c.fx.state()).toBe(before);
  });

  test('squash: one single-parent commit with the combined change', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-squash');
    await fx.commit('s-squash', base, { 'c.txt': 'c1\nc2\nc3\nsq1\n' });
    const s = await fx.commit('s-squash', 's-squash', { 'g.txt': 'g\n' });
    const m = await merge('s-squash', 't-squash', 'squash');
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(await fx.parents(m.mergeCommit)).toEqual([t]);
    expect(await fx.author(m.mergeCommit)).toBe(K.author);
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nsq1\n');
    expect(await fx.fileAt(m.mergeCommit, 'g.txt')).toBe('g\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-squash\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(false);
    expect(await fx.message(m.mergeCommit)).toBe('Squashed merge of s-squash into t-squash');
    expect(await ops.resolveRef(fx.srv, 't-squash')).toBe(m.mergeCommit);
    // squash of a target that has not diverged is still a new commit
    const s2 = await fx.commit('s-squash2', m.mergeCommit, { 'h.txt': 'h\n' });
    const m2 = await merge('s-squash2', 't-squash', 'squash');
    if (m2.kind !== 'merged') throw new Error(JSON.stringify(m2));
    expect(m2.mergeCommit).not.toBe(s2);
    expect(await fx.parents(m2.mergeCommit)).toEqual([m.mergeCommit]);
    expect(await fx.fileAt(m2.mergeCommit, 'h.txt')).toBe('h\n');
  });

  test('expected heads guard the merge', async () => {
    const { fx, base } = c;
    const t = await c.line('t-guard');
    const s = await fx.commit('s-guard', base, { 'c.txt': 'guard\n' });
    const before = await fx.state();
    expect(await merge('s-guard', 't-guard', 'merge', { expectedHead: base })).toEqual({
      kind: 'head_moved',
      head: s,
    });
    expect(await merge('s-guard', 't-guard', 'merge', { expectedHead: s, expectedTargetHead: base })).toEqual(
      { kind: 'target_moved', head: t },
    );
    expect(await fx.state()).toBe(before);
    await expect(merge('nope', 't-guard', 'merge')).rejects.toThrow(RefNotFound);
  });

  test(`deleteRef ${K.deletes}; not_found and moved leave things alone`, async () => {
    const { fx, ops, base } = c;
    const s = await fx.commit('s-del', base, { 'z.txt': 'z\n' });
    expect(await ops.deleteRef(fx.srv, 's-del', base)).toBe('moved');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBe(s);
    expect(await ops.deleteRef(fx.srv, 's-del', s)).toBe('deleted');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBeUndefined();
    if (K.kind === 'hg') {
      expect(await hgIn(fx, 'srv', 'bookmarks', '-T', '{bookmark} {node}\n')).not.toContain('s-del');
    }
    if (K.kind === 'fossil') {
      expect(await ok('fossil', ['branch', 'list', '-R', fx.srv], fx.root)).not.toContain('s-del');
      expect(await ok('fossil', ['branch', 'list', '--closed', '-R', fx.srv], fx.root)).toContain('s-del');
    }
    expect(await ops.deleteRef(fx.srv, 's-del')).toBe('not_found');
    expect(await ops.deleteRef(fx.srv, K.notARef)).toBe('not_found');
  });

  test('isAncestor', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-anc');
    expect(await ops.isAncestor(fx.srv, base, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, t, base)).toBe(false);
    expect(await ops.isAncestor(fx.srv, t, t)).toBe(true);
    for (const id of K.notCommits) expect(await ops.isAncestor(fx.srv, id, t)).toBe(false);
  });

  test('no working files are left behind', async () => {
    expect(await fs.readdir(c.fx.tmp).catch(() => [])).toEqual([]);
  });
});
