import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import { HgOps } from '../../src/vcs/hg/ops.ts';
import { createVcs, type Vcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { InvalidRefName, RefNotFound, type VcsOps } from '../../src/vcs/ops.ts';
import { VcsTimeout } from '../../src/vcs/process/run.ts';
import { BOB, makeFixture, type Fixture } from '../helpers/vcs-ops.ts';

const BASE = { 'a.txt': '1\n2\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': 'b\n', 'c.txt': 'c1\nc2\nc3\n' };

let fx: Fixture;
let main: string;
let set: Vcs;
let ops: VcsOps;
let base: string;

beforeAll(async () => {
  ({ fx, main } = await makeFixture('hg', BASE));
  set = createVcs({ pool: new ProcessPool(), tmpDir: fx.tmp, timeoutMs: 20_000 });
  ops = set.ops('hg');
  base = (await ops.resolveRef(fx.srv, main)) ?? '';
});

afterAll(async () => {
  set.closeProcesses();
  await fx.cleanup();
});

/** A fresh target bookmark one commit above `base`. */
async function line(name: string, files: Record<string, string | null> = { 'b.txt': `b ${name}\n` }) {
  return fx.commit(name, base, files, `target ${name}`);
}

/** `hg ARGS` in the client's working copy or on the server (through the fixture's command servers). */
const hgIn = (where: 'work' | 'srv', ...args: string[]): Promise<string> => {
  if (fx.hg === undefined) throw new Error('not a Mercurial fixture');
  return fx.hg(where, ...args);
};
const onSrv = (...args: string[]) => hgIn('srv', ...args);
const bookmarks = () => onSrv('bookmarks', '-T', '{bookmark} {node}\n');

describe('hg operations', () => {
  test('resolveRef answers bookmarks (also @); unknown and hostile names name nothing', async () => {
    expect(base).toMatch(/^[0-9a-f]{40}$/);
    expect(await ops.resolveRef(fx.srv, 'nope')).toBeUndefined();
    // several at once, in order (one process for git and Fossil)
    expect(await ops.resolveRefs(fx.srv, ['@', 'nope', '@ or all()', '@'])).toEqual([
      base,
      undefined,
      undefined,
      base,
    ]);
    // (a named branch, `default` included, names its head: vcs-ops-hg-targets.test.ts)
    for (const name of [
      'tip',
      '0',
      '.',
      'null',
      'all()',
      '@ or all()',
      'literal:@',
      '-x',
      '--config=x',
      ' @',
      '',
    ]) {
      expect(await ops.resolveRef(fx.srv, name)).toBeUndefined();
    }
    await expect(ops.checkMerge(fx.srv, 'all()', main)).rejects.toMatchObject({
      role: 'source',
      ref: 'all()',
    });
    await expect(ops.checkMerge(fx.srv, main, 'tip')).rejects.toThrow(RefNotFound);
  });

  test('clean: diverged on different files, with counts; a push between checks is seen', async () => {
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
    const t2 = await fx.commit('t-clean', 't-clean', { 'x.txt': 'x\n' });
    expect(await ops.checkMerge(fx.srv, 's-clean', 't-clean')).toMatchObject({
      commitsBehind: 2,
      targetHead: t2,
    });
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
    await line('t-bin', { 'img.bin': Buffer.from([0, 1, 2, 3]).toString('latin1') });
    await fx.commit('s-bin', base, { 'img.bin': Buffer.from([0, 9, 9, 9]).toString('latin1') });
    expect(await ops.checkMerge(fx.srv, 's-bin', 't-bin')).toMatchObject({
      state: 'conflict',
      conflictedFiles: ['img.bin'],
    });
  });

  test('behind: the source is already contained in the target; merging it is nothing to merge', async () => {
    const t = await line('t-behind');
    await fx.commit('t-behind', 't-behind', { 'x.txt': 'x\n' });
    await onSrv('bookmark', '-r', t, 's-behind');
    expect(await ops.checkMerge(fx.srv, 's-behind', 't-behind')).toMatchObject({
      state: 'behind',
      commitsAhead: 0,
      commitsBehind: 1,
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

  test('merge fast-forwards the target bookmark when it has not diverged; ff-only too', async () => {
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

  test('merging into @ moves @; the repository keeps no working directory and no active bookmark', async () => {
    const s = await fx.commit('s-main', main, { 'main.txt': 'm\n' });
    const m = await ops.merge(fx.srv, { source: 's-main', target: '@', style: 'merge', author: BOB });
    expect(m).toEqual({ kind: 'merged', mergeCommit: s, fastForward: true });
    expect(await ops.resolveRef(fx.srv, '@')).toBe(s);
    base = s;
    expect(await fs.readdir(fx.srv)).toEqual(['.hg']);
    await expect(fs.access(path.join(fx.srv, '.hg', 'bookmarks.current'))).rejects.toThrow();
    expect((await onSrv('log', '-r', 'wdir()', '-T', '{p1.rev}')).trim()).toBe('-1');
  });

  test('merge of a diverged target: a public merge commit with two parents by the given author', async () => {
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
    expect(await fx.author(m.mergeCommit)).toBe('Bob Builder <bob@example.test>|public');
    expect(await fx.message(m.mergeCommit)).toBe('Merge PR #1');
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nmore\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-merge\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(true);
    // the source bookmark stays where it was
    expect(await ops.resolveRef(fx.srv, 's-merge')).toBe(s);
  });

  test('a source on another named branch is merged with a merge commit, never fast-forwarded', async () => {
    const t = await line('t-named');
    const work = path.join(fx.root, 'work');
    const hg = (...a: string[]) => hgIn('work', ...a);
    await hg('update', '-q', '-C', 't-named');
    await hg('bookmark', '-f', 's-named');
    await hg('branch', 'stable');
    await fs.writeFile(path.join(work, 'n.txt'), 'n\n');
    await hg('commit', '-q', '-A', '-m', 'on stable');
    await hg('push', '-q', '--new-branch', '-B', 's-named');
    const s = (await hg('log', '-r', '.', '-T', '{node}')).trim();
    expect(
      await ops.merge(fx.srv, { source: 's-named', target: 't-named', style: 'ff-only', author: BOB }),
    ).toEqual({
      kind: 'not_fast_forward',
    });
    const m = await ops.merge(fx.srv, { source: 's-named', target: 't-named', style: 'merge', author: BOB });
    if (m.kind !== 'merged') throw new Error(JSON.stringify(m));
    expect(m.fastForward).toBe(false);
    expect(await fx.parents(m.mergeCommit)).toEqual([t, s]);
    expect((await onSrv('log', '-r', m.mergeCommit, '-T', '{branch}')).trim()).toBe('default');
  });

  test('repository hooks do not run for Triad-made commits (the command server starts no process)', async () => {
    await line('t-hook');
    await fx.commit('s-hook', base, { 'k.txt': 'k\n' });
    const marker = path.join(fx.root, 'hook-ran');
    const hgrc = path.join(fx.srv, '.hg', 'hgrc');
    await fs.writeFile(hgrc, `[hooks]\npretxncommit.block = touch '${marker}'; false\n`);
    // a new command server reads the repository's configuration with the hook
    const own = new ProcessPool();
    const fresh = new HgOps({ timeoutMs: 20_000, pool: own });
    try {
      const m = await fresh.merge(fx.srv, {
        source: 's-hook',
        target: 't-hook',
        style: 'merge',
        author: BOB,
      });
      expect(m).toMatchObject({ kind: 'merged', fastForward: false });
    } finally {
      own.close();
      await fs.rm(hgrc);
    }
    await expect(fs.access(marker)).rejects.toThrow();
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

  test('squash: one single-parent public commit with the combined change', async () => {
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
    expect(await fx.author(m.mergeCommit)).toBe('Bob Builder <bob@example.test>|public');
    expect(await fx.fileAt(m.mergeCommit, 'c.txt')).toBe('c1\nc2\nc3\nsq1\n');
    expect(await fx.fileAt(m.mergeCommit, 'g.txt')).toBe('g\n');
    expect(await fx.fileAt(m.mergeCommit, 'b.txt')).toBe('b t-squash\n');
    expect(await ops.isAncestor(fx.srv, s, m.mergeCommit)).toBe(false);
    expect(await fx.message(m.mergeCommit)).toBe('Squashed merge of s-squash into t-squash');
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
    expect(await fx.fileAt(m2.mergeCommit, 'h.txt')).toBe('h\n');
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

  test('deleteRef removes a bookmark; not_found and moved leave things alone', async () => {
    const s = await fx.commit('s-del', base, { 'z.txt': 'z\n' });
    expect(await ops.deleteRef(fx.srv, 's-del', base)).toBe('moved');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBe(s);
    expect(await ops.deleteRef(fx.srv, 's-del', s)).toBe('deleted');
    expect(await ops.resolveRef(fx.srv, 's-del')).toBeUndefined();
    expect(await bookmarks()).not.toContain('s-del');
    expect(await ops.deleteRef(fx.srv, 's-del')).toBe('not_found');
    expect(await ops.deleteRef(fx.srv, 'all()')).toBe('not_found');
  });

  test('createTag commits .hgtags on @ when the target is in its history (and @ moves)', async () => {
    const at = (await ops.resolveRef(fx.srv, '@')) ?? '';
    const r = await ops.createTag(fx.srv, { name: 'v1.0', target: base, author: BOB });
    if (r.kind !== 'created') throw new Error(JSON.stringify(r));
    expect(r.commit).toBe(base);
    expect(await ops.resolveRef(fx.srv, '@')).toBe(r.tagCommit);
    expect(await fx.parents(r.tagCommit ?? '')).toEqual([at]);
    expect(await fx.fileAt(r.tagCommit ?? '', '.hgtags')).toBe(`${base} v1.0\n`);
    expect(await fx.author(r.tagCommit ?? '')).toBe('Bob Builder <bob@example.test>|public');
    expect(await fx.message(r.tagCommit ?? '')).toBe(`Added tag v1.0 for changeset ${base.slice(0, 12)}`);
    expect((await onSrv('log', '-r', 'tag("v1.0")', '-T', '{node}')).trim()).toBe(base);
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: '@', author: BOB })).toEqual({
      kind: 'tag_exists',
      commit: base,
    });
    base = r.tagCommit ?? '';
    const r2 = await ops.createTag(fx.srv, {
      name: 'v1.1',
      target: 'v1.0',
      message: 'Release 1.1',
      author: BOB,
    });
    expect(r2).toMatchObject({ kind: 'created', commit: r.commit });
    if (r2.kind !== 'created') throw new Error('unreachable');
    expect(await fx.message(r2.tagCommit ?? '')).toBe('Release 1.1');
    expect(await fx.fileAt(r2.tagCommit ?? '', '.hgtags')).toBe(`${r.commit} v1.0\n${r.commit} v1.1\n`);
    base = r2.tagCommit ?? '';
  });

  test('createTag off @ goes on the head of the target line, and its bookmark moves', async () => {
    const s = await fx.commit('s-rel', base, { 'r.txt': 'r\n' });
    const r = await ops.createTag(fx.srv, { name: 'rel-1', target: s.slice(0, 12), author: BOB });
    if (r.kind !== 'created') throw new Error(JSON.stringify(r));
    expect(r.commit).toBe(s);
    expect(await fx.parents(r.tagCommit ?? '')).toEqual([s]);
    expect(await ops.resolveRef(fx.srv, 's-rel')).toBe(r.tagCommit);
    expect(await ops.resolveRef(fx.srv, '@')).toBe(base);
  });

  test('createTag: not_found, invalid names', async () => {
    expect(await ops.createTag(fx.srv, { name: 'v9', target: 'no-such', author: BOB })).toEqual({
      kind: 'not_found',
    });
    expect(await ops.createTag(fx.srv, { name: 'v9', target: 'tip', author: BOB })).toEqual({
      kind: 'not_found',
    });
    expect(await ops.createTag(fx.srv, { name: 'v9', target: '0', author: BOB })).toEqual({
      kind: 'not_found',
    });
    for (const name of ['tip', 'null', '.', '1234', 'a:b', ' v', '-v', '']) {
      await expect(ops.createTag(fx.srv, { name, target: base, author: BOB })).rejects.toThrow(
        InvalidRefName,
      );
    }
    expect(await ops.resolveCommit(fx.srv, 'default')).toBeDefined();
    expect(await ops.resolveCommit(fx.srv, 'all()')).toBeUndefined();
  });

  test('isAncestor', async () => {
    const t = await line('t-anc');
    expect(await ops.isAncestor(fx.srv, base, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, t, base)).toBe(false);
    expect(await ops.isAncestor(fx.srv, t, t)).toBe(true);
    expect(await ops.isAncestor(fx.srv, 'f'.repeat(40), t)).toBe(false);
    expect(await ops.isAncestor(fx.srv, 'all()', t)).toBe(false);
  });

  test('a request over its time limit kills the command server; the next call starts a new one', async () => {
    const own = new ProcessPool();
    const slow = new HgOps({ timeoutMs: 1, pool: own });
    await expect(slow.checkMerge(fx.srv, '@', '@')).rejects.toThrow(VcsTimeout);
    expect(slow.size()).toBe(0);
    own.close();
    const hgops = set.ops('hg') as HgOps;
    expect(hgops.size()).toBe(1);
    set.closeProcesses();
    expect(hgops.size()).toBe(0);
    expect(await ops.resolveRef(fx.srv, '@')).toBe(base);
  });
});
