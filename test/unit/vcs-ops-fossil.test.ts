import { describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { createVcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { InvalidRefName } from '../../src/vcs/ops.ts';
import { BOB, fossilSql, OPS_BASE, opsSuite } from '../helpers/vcs-ops.ts';
import { ok } from '../helpers/vcs.ts';

/** What only Fossil has; the cases every kind has are in vcs-ops.test.ts. */
describe('fossil operations', () => {
  const c = opsSuite('fossil', { ...OPS_BASE, 'logo.bin': '\u0000base' });
  const sql = (q: string) => fossilSql(c.fx, q);

  test('the dry run agrees with the merge and only reads: same-file edits merge, an edit against a deletion keeps the deletion', async () => {
    const { fx, ops, base } = c;
    await c.line('t-agree', { 'a.txt': '1\nT\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': null });
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

  test('behind: a source merged earlier is contained in the target; merging it again is nothing to merge', async () => {
    const { fx, ops, base } = c;
    await c.line('t-behind');
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

  test('a target that has not diverged gets a merge check-in whose files equal the source head', async () => {
    const { fx, ops } = c;
    const t = await c.line('t-ff');
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

  test('createTag adds a tag artifact; tag_exists (also for branch names), not_found, invalid names', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-tag');
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

  test('reads share the pooled fossil sql process and see a new check-in on either side right away', async () => {
    const { fx, base } = c;
    const readers = new ProcessPool();
    const own = createVcs({ pool: readers, tmpDir: fx.tmp, timeoutMs: 20_000 });
    const o = own.ops('fossil');
    try {
      const t = await c.line('t-fresh');
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
    const { fx, ops, base } = c;
    await sql("UPDATE user SET login = 'imported-admin' WHERE login = 'triad'");
    const t = await c.line('t-user');
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
