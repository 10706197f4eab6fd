import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import { createVcs, type Vcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { InvalidRefName, RefNotFound, type VcsOps } from '../../src/vcs/ops.ts';
import { BOB, makeFixture, type Fixture } from '../helpers/vcs-ops.ts';
import { ok } from '../helpers/vcs.ts';

const BASE = { 'a.txt': '1\n2\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': 'b\n', 'c.txt': 'c1\nc2\nc3\n' };

let fx: Fixture;
let main: string;
let set: Vcs;
let ops: VcsOps;
let base: string;

beforeAll(async () => {
  ({ fx, main } = await makeFixture('git', BASE));
  set = createVcs({ pool: new ProcessPool(), tmpDir: fx.tmp, timeoutMs: 20_000 });
  ops = set.ops('git');
  base = (await ops.resolveRef(fx.srv, main)) ?? '';
});

afterAll(async () => {
  set.closeProcesses();
  await fx.cleanup();
});

/** A fresh target branch at `base` (so each test has its own mainline). */
async function line(name: string, files: Record<string, string | null> = { 'b.txt': `b ${name}\n` }) {
  return fx.commit(name, base, files, `target ${name}`);
}

describe('git operations', () => {
  test('resolveRef answers branch heads; unknown and hostile names name nothing', async () => {
    expect(base).toMatch(/^[0-9a-f]{40}$/);
    expect(await ops.resolveRef(fx.srv, 'nope')).toBeUndefined();
    // several at once, in order (one process for git and Fossil)
    expect(await ops.resolveRefs(fx.srv, ['main', 'nope', 'main~1', 'main'])).toEqual([
      base,
      undefined,
      undefined,
      base,
    ]);
    for (const name of [
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
    ]) {
      expect(await ops.resolveRef(fx.srv, name)).toBeUndefined();
    }
    await expect(ops.checkMerge(fx.srv, '--help', main)).rejects.toThrow(RefNotFound);
    await expect(ops.checkMerge(fx.srv, main, 'nope')).rejects.toMatchObject({ role: 'target', ref: 'nope' });
  });

  test('clean: diverged on different files, with counts', async () => {
    const t = await line('t-clean');
    await fx.commit('s-clean', base, { 'c.txt': 'c1\nsource\nc3\n' });
    const s = await fx.commit('s-clean', 's-clean', { 'd.txt': 'new\n' });
    await fx.commit('s-clean', 's-clean', { 'e.txt': 'e\n' });
    const sHead = await ops.resolveRef(fx.srv, 's-clean');
    const check = await ops.checkMerge(fx.srv, 's-clean', 't-clean');
    expect(check).toEqual({
      state: 'clean',
      conflictedFiles: [],
      commitsAhead: 3,
      commitsBehind: 1,
      sourceHead: sHead,
      targetHead: t,
    });
    expect(s).not.toBe(sHead);
  });

  test('conflict lists the paths (content and modify/delete) and changes nothing', async () => {
    await line('t-conf', {
      'a.txt': '1\nTARGET\n3\n4\n5\n6\n7\n8\n9\n',
      'b.txt': null,
      'c.txt': 'c1\nc2\nT\n',
    });
    await fx.commit('s-conf', base, {
      'a.txt': '1\nSOURCE\n3\n4\n5\n6\n7\n8\n9\n',
      'b.txt': 'changed\n',
      'c.txt': 'S\nc2\nc3\n',
    });
    const before = await fx.state();
    const check = await ops.checkMerge(fx.srv, 's-conf', 't-conf');
    expect(check.state).toBe('conflict');
    expect(check.conflictedFiles).toEqual(['a.txt', 'b.txt']);
    expect([check.commitsAhead, check.commitsBehind]).toEqual([1, 1]);
    const merge = await ops.merge(fx.srv, {
      source: 's-conf',
      target: 't-conf',
      style: 'merge',
      author: BOB,
    });
    expect(merge).toEqual({ kind: 'conflict', conflictedFiles: ['a.txt', 'b.txt'] });
    expect(
      await ops.merge(fx.srv, { source: 's-conf', target: 't-conf', style: 'squash', author: BOB }),
    ).toEqual(merge);
    expect(await fx.state()).toBe(before);
  });

  test('binary files changed on both sides conflict', async () => {
    await line('t-bin', { 'img.bin': '\u0000target' });
    await fx.commit('s-bin', base, { 'img.bin': '\u0000source' });
    expect(await ops.checkMerge(fx.srv, 's-bin', 't-bin')).toMatchObject({
      state: 'conflict',
      conflictedFiles: ['img.bin'],
    });
  });

  test('behind: the source is already contained in the target; merging it is nothing to merge', async () => {
    const t = await line('t-behind');
    await fx.commit('t-behind', 't-behind', { 'x.txt': 'x\n' });
    // s-behind2 names an ancestor of t-behind
    await ok('git', ['-C', fx.srv, 'branch', 's-behind2', t], fx.root);
    const check = await ops.checkMerge(fx.srv, 's-behind2', 't-behind');
    expect(check).toMatchObject({ state: 'behind', commitsAhead: 0, conflictedFiles: [] });
    expect(check.commitsBehind).toBe(1);
    const before = await fx.state();
    expect(
      await ops.merge(fx.srv, { source: 's-behind2', target: 't-behind', style: 'merge', author: BOB }),
    ).toEqual({
      kind: 'nothing_to_merge',
    });
    expect(await fx.state()).toBe(before);
  });

  test('empty: the source makes a change the target already has', async () => {
    await line('t-empty', { 'a.txt': 'same change\n' });
    await fx.commit('s-empty', base, { 'a.txt': 'same change\n' }, 'same change elsewhere');
    const check = await ops.checkMerge(fx.srv, 's-empty', 't-empty');
    expect(check).toMatchObject({ state: 'empty', commitsAhead: 1, commitsBehind: 1 });
    // a squash of nothing is refused; a merge still records the history
    expect(
      await ops.merge(fx.srv, { source: 's-empty', target: 't-empty', style: 'squash', author: BOB }),
    ).toEqual({
      kind: 'nothing_to_merge',
    });
    const m = await ops.merge(fx.srv, { source: 's-empty', target: 't-empty', style: 'merge', author: BOB });
    expect(m).toMatchObject({ kind: 'merged', fastForward: false });
  });

  test('merge fast-forwards a target that has not diverged; ff-only too', async () => {
    const t = await line('t-ff');
    const s1 = await fx.commit('s-ff', t, { 'f.txt': 'f\n' });
    expect(await ops.checkMerge(fx.srv, 's-ff', 't-ff')).toMatchObject({
      state: 'clean',
      commitsAhead: 1,
      commitsBehind: 0,
    });
    const m = await ops.merge(fx.srv, {
      source: 's-ff',
      target: 't-ff',
      style: 'merge',
      author: BOB,
      expectedHead: s1,
      expectedTargetHead: t,
    });
    expect(m).toEqual({ kind: 'merged', mergeCommit: s1, fastForward: true });
    expect(await ops.resolveRef(fx.srv, 't-ff')).toBe(s1);
    const s2 = await fx.commit('s-ff', 's-ff', { 'f.txt': 'f2\n' });
    expect(
      await ops.merge(fx.srv, { source: 's-ff', target: 't-ff', style: 'ff-only', author: BOB }),
    ).toEqual({
      kind: 'merged',
      mergeCommit: s2,
      fastForward: true,
    });
  });

  test('merge of a diverged target: a merge commit with two parents by the given author', async () => {
    const t = await line('t-merge');
    const s = await fx.commit('s-merge', base, { 'c.txt': 'c1\nc2\nc3\nmore\n' });
    const m = await ops.merge(fx.srv, {
      source: 's-merge',
      target: 't-merge',
      style: 'merge',
      message: 'Merge PR #1',
      author: BOB,
    });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(m.fastForward).toBe(false);
    expect(await ops.resolveRef(fx.srv, 't-merge')).toBe(m.mergeCommit);
    expect(await fx.parents(m.mergeCommit)).toEqual([t, s]);
    expect(await fx.author(m.mergeCommit)).toBe(
      'Bob Builder <bob@example.test>|Bob Builder <bob@example.test>',
    );
    expect(await fx.message(m.mergeCommit)).toBe('Merge PR #1');
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nmore\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-merge\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(true);
  });

  test('ff-only refuses a diverged target and changes nothing', async () => {
    await line('t-ffo');
    await fx.commit('s-ffo', base, { 'c.txt': 'other\n' });
    const before = await fx.state();
    expect(
      await ops.merge(fx.srv, { source: 's-ffo', target: 't-ffo', style: 'ff-only', author: BOB }),
    ).toEqual({
      kind: 'not_fast_forward',
    });
    expect(await fx.state()).toBe(before);
  });

  test('squash: one single-parent commit with the combined change', async () => {
    const t = await line('t-squash');
    await fx.commit('s-squash', base, { 'c.txt': 'c1\nc2\nc3\nsq1\n' });
    const s = await fx.commit('s-squash', 's-squash', { 'g.txt': 'g\n' });
    const m = await ops.merge(fx.srv, {
      source: 's-squash',
      target: 't-squash',
      style: 'squash',
      author: BOB,
    });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(await fx.parents(m.mergeCommit)).toEqual([t]);
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nsq1\n');
    expect(await fx.fileAt(m.mergeCommit, 'g.txt')).toBe('g\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-squash\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(false);
    expect(await fx.message(m.mergeCommit)).toBe('Squashed merge of s-squash into t-squash');
    // squash of a target that has not diverged is still a new commit
    const s2 = await fx.commit('s-squash2', m.mergeCommit, { 'h.txt': 'h\n' });
    const m2 = await ops.merge(fx.srv, {
      source: 's-squash2',
      target: 't-squash',
      style: 'squash',
      author: BOB,
    });
    if (m2.kind !== 'merged') throw new Error(JSON.stringify(m2));
    expect(m2.mergeCommit).not.toBe(s2);
    expect(await fx.parents(m2.mergeCommit)).toEqual([m.mergeCommit]);
  });

  test('expected heads guard the merge', async () => {
    const t = await line('t-guard');
    const s = await fx.commit('s-guard', base, { 'c.txt': 'guard\n' });
    const before = await fx.state();
    expect(
      await ops.merge(fx.srv, {
        source: 's-guard',
        target: 't-guard',
        style: 'merge',
        author: BOB,
        expectedHead: base,
      }),
    ).toEqual({
      kind: 'head_moved',
      head: s,
    });
    expect(
      await ops.merge(fx.srv, {
        source: 's-guard',
        target: 't-guard',
        style: 'merge',
        author: BOB,
        expectedHead: s,
        expectedTargetHead: base,
      }),
    ).toEqual({ kind: 'target_moved', head: t });
    expect(await fx.state()).toBe(before);
    await expect(
      ops.merge(fx.srv, { source: 'nope', target: 't-guard', style: 'merge', author: BOB }),
    ).rejects.toThrow(RefNotFound);
  });

  test('deleteRef removes a branch; not_found and moved leave things alone', async () => {
    const s = await fx.commit('s-del', base, { 'z.txt': 'z\n' });
    expect(await ops.deleteRef(fx.srv, 's-del', base)).toBe('moved');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBe(s);
    expect(await ops.deleteRef(fx.srv, 's-del', s)).toBe('deleted');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBeUndefined();
    expect(await ops.deleteRef(fx.srv, 's-del')).toBe('not_found');
    expect(await ops.deleteRef(fx.srv, '-d')).toBe('not_found');
  });

  test('createTag: lightweight and annotated tags, tag_exists, not_found, invalid names', async () => {
    const t = await line('t-tag');
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: 't-tag', author: BOB })).toEqual({
      kind: 'created',
      name: 'v1.0',
      commit: t,
    });
    expect(await ok('git', ['-C', fx.srv, 'cat-file', '-t', 'refs/tags/v1.0'], fx.root)).toBe('commit\n');
    expect(
      await ops.createTag(fx.srv, {
        name: 'v1.1',
        target: base.slice(0, 10),
        message: 'Release 1.1',
        author: BOB,
      }),
    ).toEqual({
      kind: 'created',
      name: 'v1.1',
      commit: base,
    });
    const tagObj = await ok('git', ['-C', fx.srv, 'cat-file', '-p', 'refs/tags/v1.1'], fx.root);
    expect(tagObj).toContain(`object ${base}`);
    expect(tagObj).toContain('tagger Bob Builder <bob@example.test>');
    expect(tagObj).toContain('Release 1.1');
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: base, author: BOB })).toEqual({
      kind: 'tag_exists',
      commit: t,
    });
    expect(await ops.createTag(fx.srv, { name: 'v2', target: 'no-such-branch', author: BOB })).toEqual({
      kind: 'not_found',
    });
    expect(await ops.createTag(fx.srv, { name: 'v3', target: 'v1.1', author: BOB })).toMatchObject({
      kind: 'created',
      commit: base,
    });
    expect(await ops.resolveCommit(fx.srv, t)).toBe(t);
    expect(await ops.resolveCommit(fx.srv, 'HEAD~1')).toBeUndefined();
    for (const name of ['-v1', 'v 1', 'v1..2', 'v1.lock', 'a:b', '@', 'v1^', '']) {
      await expect(ops.createTag(fx.srv, { name, target: base, author: BOB })).rejects.toThrow(
        InvalidRefName,
      );
    }
    await expect(ops.createTag(fx.srv, { name: 'v1.0/x', target: base, author: BOB })).rejects.toThrow(
      InvalidRefName,
    );
  });

  test('isAncestor', async () => {
    const t = await line('t-anc');
    expect(await ops.isAncestor(fx.srv, base, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, t, base)).toBe(false);
    expect(await ops.isAncestor(fx.srv, t, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, '0'.repeat(40), t)).toBe(false);
    expect(await ops.isAncestor(fx.srv, '--all', t)).toBe(false);
  });

  test('no working files are left behind', async () => {
    expect(await fs.readdir(fx.tmp).catch(() => [])).toEqual([]);
  });
});
