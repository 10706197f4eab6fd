import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { createVcs, type Vcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { InvalidRefName, RefNotFound, type VcsOps } from '../../src/vcs/ops.ts';
import { BOB, makeFixture, type Fixture } from '../helpers/vcs-ops.ts';
import { ok } from '../helpers/vcs.ts';

const BASE = {
  'a.txt': '1\n2\n3\n4\n5\n6\n7\n8\n9\n',
  'b.txt': 'b\n',
  'c.txt': 'c1\nc2\nc3\n',
  'logo.bin': '\u0000base',
};

let fx: Fixture;
let main: string;
let set: Vcs;
let ops: VcsOps;
let base: string;

beforeAll(async () => {
  ({ fx, main } = await makeFixture('fossil', BASE));
  set = createVcs({ pool: new ProcessPool(), tmpDir: fx.tmp, timeoutMs: 20_000 });
  ops = set.ops('fossil');
  base = (await ops.resolveRef(fx.srv, main)) ?? '';
});

afterAll(async () => {
  set.closeProcesses();
  await fx.cleanup();
});

/** A fresh target branch one check-in above `base`. */
async function line(name: string, files: Record<string, string | null> = { 'b.txt': `b ${name}\n` }) {
  return fx.commit(name, base, files, `target ${name}`);
}

const sql = async (q: string) => (await ok('fossil', ['sql', '-R', fx.srv, q], fx.root)).trim();

describe('fossil operations', () => {
  test('resolveRef answers branch heads; unknown and hostile names name nothing', async () => {
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(await ops.resolveRef(fx.srv, 'nope')).toBeUndefined();
    // several at once, in order (one process for git and Fossil)
    expect(await ops.resolveRefs(fx.srv, [main, 'nope', "trunk' OR '1'='1", main])).toEqual([
      base,
      undefined,
      undefined,
      base,
    ]);
    const hostile = [
      "trunk' OR '1'='1",
      "'; DROP TABLE blob; --",
      'tip',
      'current',
      '-R',
      'root:trunk',
      ' trunk',
      '',
    ];
    for (const name of hostile) expect(await ops.resolveRef(fx.srv, name)).toBeUndefined();
    await expect(ops.checkMerge(fx.srv, "x' OR 1=1 --", main)).rejects.toMatchObject({ role: 'source' });
    await expect(ops.checkMerge(fx.srv, main, 'nope')).rejects.toThrow(RefNotFound);
    expect(await sql('select count(*) from blob')).not.toBe('0');
  });

  test('clean: diverged on different files, with counts', async () => {
    const t = await line('t-clean');
    await fx.commit('s-clean', base, { 'c.txt': 'c1\nsource\nc3\n' });
    await fx.commit('s-clean', 's-clean', { 'd.txt': 'new\n' });
    const s = await fx.commit('s-clean', 's-clean', { 'e.txt': 'e\n' });
    expect(await ops.checkMerge(fx.srv, 's-clean', 't-clean')).toEqual({
      state: 'clean',
      conflictedFiles: [],
      commitsAhead: 3,
      commitsBehind: 1,
      sourceHead: s,
      targetHead: t,
    });
  });

  test('conflict lists the paths (text and binary) and changes nothing; no check-out is left', async () => {
    await line('t-conf', {
      'a.txt': '1\nTARGET\n3\n4\n5\n6\n7\n8\n9\n',
      'c.txt': 'c1\nc2\nT\n',
      'img.bin': '\u0000target',
    });
    await fx.commit('s-conf', base, {
      'a.txt': '1\nSOURCE\n3\n4\n5\n6\n7\n8\n9\n',
      'c.txt': 'S\nc2\nc3\n',
      'img.bin': '\u0000source',
    });
    const before = await fx.state();
    const check = await ops.checkMerge(fx.srv, 's-conf', 't-conf');
    expect(check.state).toBe('conflict');
    expect(check.conflictedFiles).toEqual(['a.txt', 'img.bin']);
    expect([check.commitsAhead, check.commitsBehind]).toEqual([1, 1]);
    const merge = await ops.merge(fx.srv, {
      source: 's-conf',
      target: 't-conf',
      style: 'merge',
      author: BOB,
    });
    expect(merge).toEqual({ kind: 'conflict', conflictedFiles: ['a.txt', 'img.bin'] });
    expect(
      await ops.merge(fx.srv, { source: 's-conf', target: 't-conf', style: 'squash', author: BOB }),
    ).toEqual(merge);
    expect(await fx.state()).toBe(before);
    expect(await fs.readdir(fx.tmp)).toEqual([]);
    // only the test's own check-out is registered in the repository
    expect(await sql("select count(*) from config where name like 'ckout:%'")).toBe('1');
  });

  test('the dry run agrees with the merge and only reads: same-file edits merge, an edit against a deletion keeps the deletion', async () => {
    await line('t-agree', { 'a.txt': '1\nT\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': null });
    await fx.commit('s-agree', base, {
      'a.txt': '1\n2\n3\n4\n5\n6\n7\nS\n9\n',
      'b.txt': 'edited\n',
      'c.txt': null,
    });
    const digest = async () =>
      createHash('sha256')
        .update(await fs.readFile(fx.srv))
        .digest('hex');
    const before = await digest();
    expect(await ops.checkMerge(fx.srv, 's-agree', 't-agree')).toMatchObject({
      state: 'clean',
      conflictedFiles: [],
    });
    expect(await digest()).toBe(before);
    const m = await ops.merge(fx.srv, { source: 's-agree', target: 't-agree', style: 'merge', author: BOB });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(await fx.fileAt(m.mergeCommit, 'a.txt')).toBe('1\nT\n3\n4\n5\n6\n7\nS\n9\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBeUndefined();
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBeUndefined();
  });

  test('a binary file changed on both sides conflicts', async () => {
    await line('t-bin', { 'logo.bin': '\u0000target' });
    await fx.commit('s-bin', base, { 'logo.bin': '\u0000source' });
    expect(await ops.checkMerge(fx.srv, 's-bin', 't-bin')).toMatchObject({
      state: 'conflict',
      conflictedFiles: ['logo.bin'],
    });
  });

  test('behind: a source merged earlier is contained in the target; merging it again is nothing to merge', async () => {
    await line('t-behind');
    await fx.commit('s-behind', base, { 'x.txt': 'x\n' });
    expect(
      await ops.merge(fx.srv, { source: 's-behind', target: 't-behind', style: 'merge', author: BOB }),
    ).toMatchObject({ kind: 'merged' });
    expect(await ops.checkMerge(fx.srv, 's-behind', 't-behind')).toMatchObject({
      state: 'behind',
      commitsAhead: 0,
      commitsBehind: 2,
      conflictedFiles: [],
    });
    const before = await fx.state();
    expect(
      await ops.merge(fx.srv, { source: 's-behind', target: 't-behind', style: 'merge', author: BOB }),
    ).toEqual({
      kind: 'nothing_to_merge',
    });
    expect(await fx.state()).toBe(before);
  });

  test('empty: the source makes a change the target already has', async () => {
    await line('t-empty', { 'a.txt': 'same change\n' });
    await fx.commit('s-empty', base, { 'a.txt': 'same change\n' }, 'same change elsewhere');
    expect(await ops.checkMerge(fx.srv, 's-empty', 't-empty')).toMatchObject({
      state: 'empty',
      commitsAhead: 1,
      commitsBehind: 1,
    });
    expect(
      await ops.merge(fx.srv, { source: 's-empty', target: 't-empty', style: 'squash', author: BOB }),
    ).toEqual({
      kind: 'nothing_to_merge',
    });
    const m = await ops.merge(fx.srv, { source: 's-empty', target: 't-empty', style: 'merge', author: BOB });
    expect(m).toMatchObject({ kind: 'merged', fastForward: false });
  });

  test('a target that has not diverged gets a merge check-in whose files equal the source head', async () => {
    const t = await line('t-ff');
    const s1 = await fx.commit('s-ff', 't-ff', { 'f.txt': 'f\n' });
    expect(await ops.checkMerge(fx.srv, 's-ff', 't-ff')).toMatchObject({
      state: 'clean',
      commitsAhead: 1,
      commitsBehind: 0,
    });
    const m = await ops.merge(fx.srv, {
      source: 's-ff',
      target: 't-ff',
      style: 'ff-only',
      author: BOB,
      expectedHead: s1,
      expectedTargetHead: t,
    });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(m.fastForward).toBe(false);
    expect(await ops.resolveRef(fx.srv, 't-ff')).toBe(m.mergeCommit);
    expect(await fx.parents(m.mergeCommit)).toEqual([t, s1]);
    expect(await fx.fileAt(m.mergeCommit, 'f.txt')).toBe('f\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-ff\n');
    // the source branch keeps its head
    expect(await ops.resolveRef(fx.srv, 's-ff')).toBe(s1);
  });

  test('merge of a diverged target: a merge check-in on the target branch by the given user', async () => {
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
    expect(await fx.author(m.mergeCommit)).toBe('Bob Builder');
    expect(await fx.message(m.mergeCommit)).toBe('Merge PR #1');
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nmore\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-merge\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(true);
    expect(await sql(`select count(*) from config where name like 'ckout:%'`)).toBe('1');
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

  test('squash: one check-in without a merge link, with the combined change', async () => {
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
    expect(await ops.resolveRef(fx.srv, 't-squash')).toBe(m.mergeCommit);
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
    ).toEqual({ kind: 'head_moved', head: s });
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

  test('deleteRef closes the branch; not_found and moved leave things alone', async () => {
    const s = await fx.commit('s-del', base, { 'z.txt': 'z\n' });
    expect(await ops.deleteRef(fx.srv, 's-del', base)).toBe('moved');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBe(s);
    expect(await ops.deleteRef(fx.srv, 's-del', s)).toBe('deleted');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBeUndefined();
    expect(await ok('fossil', ['branch', 'list', '-R', fx.srv], fx.root)).not.toContain('s-del');
    expect(await ok('fossil', ['branch', 'list', '--closed', '-R', fx.srv], fx.root)).toContain('s-del');
    expect(await ops.deleteRef(fx.srv, 's-del')).toBe('not_found');
    expect(await ops.deleteRef(fx.srv, "s-del' OR 1=1 --")).toBe('not_found');
  });

  test('createTag adds a tag artifact; tag_exists (also for branch names), not_found, invalid names', async () => {
    const t = await line('t-tag');
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: 't-tag', author: BOB })).toEqual({
      kind: 'created',
      name: 'v1.0',
      commit: t,
    });
    expect(await ok('fossil', ['tag', 'list', '-R', fx.srv, t], fx.root)).toContain('v1.0');
    expect(await ops.resolveCommit(fx.srv, 'v1.0')).toBe(t);
    expect(await ops.createTag(fx.srv, { name: 'v1.1', target: base.slice(0, 12), author: BOB })).toEqual({
      kind: 'created',
      name: 'v1.1',
      commit: base,
    });
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: base, author: BOB })).toEqual({
      kind: 'tag_exists',
      commit: t,
    });
    expect(await ops.createTag(fx.srv, { name: 't-tag', target: base, author: BOB })).toEqual({
      kind: 'tag_exists',
      commit: t,
    });
    expect(await ops.createTag(fx.srv, { name: 'v2', target: 'no-such', author: BOB })).toEqual({
      kind: 'not_found',
    });
    expect(await ops.createTag(fx.srv, { name: 'v2', target: 'tip', author: BOB })).toEqual({
      kind: 'not_found',
    });
    for (const name of ['-v1', 'v 1', 'wiki-x', 'tkt-1', '', ' v']) {
      await expect(ops.createTag(fx.srv, { name, target: base, author: BOB })).rejects.toThrow(
        InvalidRefName,
      );
    }
    expect(await ops.resolveCommit(fx.srv, t)).toBe(t);
    expect(await ops.resolveCommit(fx.srv, "' OR 1=1 --")).toBeUndefined();
  });

  test('isAncestor', async () => {
    const t = await line('t-anc');
    expect(await ops.isAncestor(fx.srv, base, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, t, base)).toBe(false);
    expect(await ops.isAncestor(fx.srv, t, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, '0'.repeat(64), t)).toBe(false);
    expect(await ops.isAncestor(fx.srv, "' OR 1=1 --", t)).toBe(false);
  });

  test('reads share the pooled fossil sql process and see a new check-in on either side right away', async () => {
    const readers = new ProcessPool();
    const own = createVcs({ pool: readers, tmpDir: fx.tmp, timeoutMs: 20_000 });
    const o = own.ops('fossil');
    try {
      const t = await line('t-fresh');
      const s = await fx.commit('s-fresh', base, { 'f.txt': 'f\n' });
      expect(await o.resolveRefs(fx.srv, ['s-fresh', 't-fresh'])).toEqual([s, t]);
      const reader = own.reader('fossil', fx.srv);
      expect(await o.checkMerge(fx.srv, 's-fresh', 't-fresh')).toMatchObject({
        state: 'clean',
        commitsAhead: 1,
        commitsBehind: 1,
      });
      // Check-ins by another process (a client's commit); the pool is not invalidated.
      const s2 = await fx.commit('s-fresh', 's-fresh', { 'f.txt': 'f2\n' });
      expect(await o.resolveRef(fx.srv, 's-fresh')).toBe(s2);
      expect(await o.isAncestor(fx.srv, s, s2)).toBe(true);
      const t2 = await fx.commit('t-fresh', 't-fresh', { 'f.txt': 'other\n' });
      expect(await o.resolveRefs(fx.srv, ['s-fresh', 't-fresh'])).toEqual([s2, t2]);
      expect(await o.checkMerge(fx.srv, 's-fresh', 't-fresh')).toEqual({
        state: 'conflict',
        conflictedFiles: ['f.txt'],
        commitsAhead: 2,
        commitsBehind: 2,
        sourceHead: s2,
        targetHead: t2,
      });
      expect(await o.resolveCommit(fx.srv, t2.slice(0, 12))).toBe(t2);
      // A merge check-in written by `fossil commit` in a check-out is seen by the next read too.
      const s3 = await fx.commit('s-fresh3', t2, { 'g.txt': 'g\n' });
      const m = await o.merge(fx.srv, { source: 's-fresh3', target: 't-fresh', style: 'merge', author: BOB });
      if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
      expect(await o.resolveRef(fx.srv, 't-fresh')).toBe(m.mergeCommit);
      expect(await o.isAncestor(fx.srv, s3, m.mergeCommit)).toBe(true);
      // One process served every read.
      expect(readers.size()).toBe(1);
      expect(own.reader('fossil', fx.srv)).toBe(reader);
    } finally {
      readers.close();
    }
  });

  test('a repository without a "triad" user (imported elsewhere) still merges and tags', async () => {
    await sql("UPDATE user SET login = 'imported-admin' WHERE login = 'triad'");
    const t = await line('t-user');
    await fx.commit('s-user', base, { 'u.txt': 'u\n' });
    const m = await ops.merge(fx.srv, { source: 's-user', target: 't-user', style: 'merge', author: BOB });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(await fx.author(m.mergeCommit)).toBe('Bob Builder');
    expect(await ops.createTag(fx.srv, { name: 'v-user', target: t, author: BOB })).toMatchObject({
      kind: 'created',
    });
    expect(await ops.deleteRef(fx.srv, 's-user')).toBe('deleted');
  });
});
