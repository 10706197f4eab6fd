import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import path from 'node:path';
import { createVcs, type Vcs } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { headMoves } from '../../src/vcs/refs.ts';
import { RefNotFound, type VcsOps } from '../../src/vcs/ops.ts';
import type { VcsDriver } from '../../src/vcs/driver.ts';
import { BOB } from '../helpers/vcs-ops.ts';
import { ok, sh, tempDir, writeFile } from '../helpers/vcs.ts';

/**
 * Mercurial pull request refs beyond bookmarks (DESIGN.md section 11): `@` in a repository without
 * an `@` bookmark stands for the default named branch's newest head and a merge into it creates
 * `@`; a name that is no bookmark but a named branch is that branch's newest head and a merge
 * commits on it; a bookmark wins a name clash. Also the heads a change's pull requests compare
 * (`refHeads` of snapshots). Repositories written with the stock `hg` client, no bookmark but the
 * ones a test makes.
 */
const HG = '/usr/bin/hg';

let vcs: Vcs;
let ops: VcsOps;
let driver: VcsDriver;
let root: string;

beforeAll(async () => {
  root = await tempDir('triad-hg-targets-');
  vcs = createVcs({ pool: new ProcessPool(), tmpDir: path.join(root, 'tmp'), timeoutMs: 20_000 });
  ops = vcs.ops('hg');
  driver = vcs.driver('hg');
});

afterAll(() => {
  vcs.closeProcesses();
});

/** A server repository and a client clone: `hg(...)` in the clone, `commit` pushes. */
async function fresh(name: string) {
  const srv = path.join(root, `${name}-srv`);
  const work = path.join(root, `${name}-work`);
  await driver.init(srv);
  await ok(HG, ['clone', '-q', srv, work], root);
  const hg = (...a: string[]) => ok(HG, a, work);
  /** A commit on top of `from` (a rev, or the working copy's parent), pushed; its id. */
  const commit = async (files: Record<string, string>, opts: { from?: string; branch?: string } = {}) => {
    if (opts.from !== undefined) await hg('update', '-q', '-C', opts.from);
    if (opts.branch !== undefined) await hg('branch', '-q', '-f', opts.branch);
    for (const [f, c] of Object.entries(files)) await writeFile(work, f, c);
    await hg('commit', '-q', '-A', '-m', `change ${Object.keys(files).join(' ')}`);
    const r = await sh(HG, ['push', '-q', '-f', srv], work);
    if (r.code > 1) throw new Error(`hg push: ${r.stderr}`);
    return (await hg('log', '-r', '.', '-T', '{node}')).trim();
  };
  /** Moves (or creates) a bookmark on the server. */
  const bookmark = (mark: string, rev: string) => ok(HG, ['bookmark', '-f', '-r', rev, mark], srv);
  const onSrv = (...a: string[]) => ok(HG, a, srv);
  const marks = async () =>
    Object.fromEntries(
      (await onSrv('bookmarks', '-T', '{bookmark} {node}\n'))
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ')),
    );
  const info = async (rev: string) => {
    const [branch = '', parents = ''] = (
      await onSrv('log', '-r', rev, '-T', '{branch}|{p1.node} {p2.node}')
    ).split('|');
    return { branch, parents: parents.split(' ').filter((p) => p !== '' && !/^0+$/.test(p)) };
  };
  return { srv, hg, commit, bookmark, marks, info, onSrv };
}

const author = BOB;

describe('hg pull request targets', () => {
  test('a fresh repository: @ and default name the default branch head; a bookmark that is that head has nothing to merge', async () => {
    const r = await fresh('plain');
    const base = await r.commit({ README: 'hello\n' });
    const feature = await r.commit({ 'feature.txt': 'feature\n' });
    await r.bookmark('feature', feature);
    const other = await r.commit({ 'other.txt': 'x\n' }, { from: base, branch: 'other' });
    expect(await ops.resolveRefs(r.srv, ['@', 'default', 'other', 'feature', 'nope'])).toEqual([
      feature,
      feature,
      other,
      feature,
      undefined,
    ]);
    // the bookmark's changesets are the default branch itself
    expect(await ops.checkMerge(r.srv, 'feature', '@')).toMatchObject({
      state: 'behind',
      commitsAhead: 0,
      targetHead: feature,
    });
    expect(await ops.merge(r.srv, { source: 'feature', target: '@', style: 'merge', author })).toEqual({
      kind: 'nothing_to_merge',
    });
    expect(await r.marks()).toEqual({ feature });
  });

  test('a fresh repository: a feature bookmark on a new head merges into @ with a merge commit on default, and @ is created there', async () => {
    const r = await fresh('merge');
    const base = await r.commit({ README: 'hello\n' });
    const feature = await r.commit({ 'feature.txt': 'feature\n' });
    await r.bookmark('feature', feature);
    const main = await r.commit({ 'main.txt': 'main\n' }, { from: base });
    expect(await ops.resolveRef(r.srv, '@')).toBe(main);
    const check = await ops.checkMerge(r.srv, 'feature', '@');
    expect(check).toMatchObject({
      state: 'clean',
      commitsAhead: 1,
      commitsBehind: 1,
      sourceHead: feature,
      targetHead: main,
    });
    expect(await ops.merge(r.srv, { source: 'feature', target: '@', style: 'ff-only', author })).toEqual({
      kind: 'not_fast_forward',
    });
    expect(await r.marks()).toEqual({ feature });

    const out = await ops.merge(r.srv, { source: 'feature', target: '@', style: 'merge', author });
    expect(out).toMatchObject({ kind: 'merged', fastForward: false });
    const merged = (out as { mergeCommit: string }).mergeCommit;
    expect(await r.marks()).toEqual({ feature, '@': merged });
    expect(await r.info(merged)).toEqual({ branch: 'default', parents: [main, feature] });
    // from now on `@` is the bookmark
    expect(await ops.resolveRef(r.srv, '@')).toBe(merged);
  });

  test('a fresh repository: @ is the newest of several default heads; a named-branch source merges into it on default', async () => {
    const r = await fresh('heads2');
    const base = await r.commit({ README: 'hello\n' });
    await r.commit({ 'one.txt': 'one\n' });
    const newest = await r.commit({ 'two.txt': 'two\n' }, { from: base });
    expect(await ops.resolveRef(r.srv, '@')).toBe(newest);
    const topic = await r.commit({ 'topic.txt': 'topic\n' }, { from: newest, branch: 'topic' });
    // linear, but across named branches: never a fast-forward
    expect(await ops.checkMerge(r.srv, 'topic', '@')).toMatchObject({ state: 'clean', commitsBehind: 0 });
    expect(await ops.merge(r.srv, { source: 'topic', target: '@', style: 'ff-only', author })).toEqual({
      kind: 'not_fast_forward',
    });
    const out = await ops.merge(r.srv, { source: 'topic', target: '@', style: 'merge', author });
    expect(out).toMatchObject({ kind: 'merged', fastForward: false });
    const merged = (out as { mergeCommit: string }).mergeCommit;
    expect(await r.info(merged)).toEqual({ branch: 'default', parents: [newest, topic] });
    expect(await r.marks()).toEqual({ '@': merged });
  });

  test('a bookmarked head is a line of its own: @ and a named branch prefer the newest head without a bookmark', async () => {
    const r = await fresh('marked');
    const base = await r.commit({ README: 'hello\n' });
    const main = await r.commit({ 'main.txt': 'main\n' });
    // pushed last, so the newest head of default, but bookmarked
    const feature = await r.commit({ 'feature.txt': 'feature\n' }, { from: base });
    await r.bookmark('feature', feature);
    expect(await ops.resolveRefs(r.srv, ['@', 'default'])).toEqual([main, main]);
    expect(driver.refHeads(await driver.snapshot(r.srv))).toEqual(
      new Map([
        ['default', main],
        ['@', main],
        ['feature', feature],
      ]),
    );
    expect(await ops.checkMerge(r.srv, 'feature', '@')).toMatchObject({ state: 'clean', commitsAhead: 1 });
    // every head bookmarked: the newest
    await r.bookmark('other', main);
    expect(await ops.resolveRef(r.srv, '@')).toBe(feature);
  });

  test('with an @ bookmark, @ is the bookmark, not the default branch head', async () => {
    const r = await fresh('at');
    const base = await r.commit({ README: 'hello\n' });
    const later = await r.commit({ 'later.txt': 'later\n' });
    await r.bookmark('@', base);
    expect(await ops.resolveRefs(r.srv, ['@', 'default'])).toEqual([base, later]);
    await r.bookmark('feature', later);
    // the bookmark moves (a fast-forward), as before
    expect(await ops.merge(r.srv, { source: 'feature', target: '@', style: 'merge', author })).toEqual({
      kind: 'merged',
      mergeCommit: later,
      fastForward: true,
    });
    expect(await r.marks()).toEqual({ '@': later, feature: later });
  });

  test('a named-branch target: merges and squashes commit on that branch and create no bookmark; guards hold', async () => {
    const r = await fresh('named');
    const base = await r.commit({ README: 'hello\n' });
    const stable = await r.commit({ 'stable.txt': 'stable\n' }, { branch: 'stable' });
    const feature = await r.commit({ 'feature.txt': 'feature\n' }, { from: base, branch: 'default' });
    await r.bookmark('feature', feature);
    expect(await ops.checkMerge(r.srv, 'feature', 'stable')).toMatchObject({
      state: 'clean',
      commitsAhead: 1,
      commitsBehind: 1,
      targetHead: stable,
    });
    expect(await ops.merge(r.srv, { source: 'feature', target: 'stable', style: 'ff-only', author })).toEqual(
      {
        kind: 'not_fast_forward',
      },
    );
    const guard = await ops.merge(r.srv, {
      source: 'feature',
      target: 'stable',
      style: 'merge',
      author,
      expectedTargetHead: feature,
    });
    expect(guard).toEqual({ kind: 'target_moved', head: stable });

    const out = await ops.merge(r.srv, { source: 'feature', target: 'stable', style: 'merge', author });
    expect(out).toMatchObject({ kind: 'merged', fastForward: false });
    const merged = (out as { mergeCommit: string }).mergeCommit;
    expect(await r.info(merged)).toEqual({ branch: 'stable', parents: [stable, feature] });
    expect(await ops.resolveRef(r.srv, 'stable')).toBe(merged);
    expect(await r.marks()).toEqual({ feature });
    expect(await ops.checkMerge(r.srv, 'feature', 'stable')).toMatchObject({ state: 'behind' });

    // squash: one single-parent changeset on the branch
    const more = await r.commit({ 'more.txt': 'more\n' }, { from: feature });
    await r.bookmark('more', more);
    const sq = await ops.merge(r.srv, { source: 'more', target: 'stable', style: 'squash', author });
    expect(sq).toMatchObject({ kind: 'merged', fastForward: false });
    const squashed = (sq as { mergeCommit: string }).mergeCommit;
    expect(await r.info(squashed)).toEqual({ branch: 'stable', parents: [merged] });
    expect(await r.onSrv('cat', '-r', 'stable', 'path:more.txt')).toBe('more\n');
    // the same name, also as the source: a named branch names its newest head there too
    expect(await ops.checkMerge(r.srv, 'stable', '@')).toMatchObject({ sourceHead: squashed });
  });

  test('a bookmark wins a name clash with a named branch; unknown names are ref_not_found', async () => {
    const r = await fresh('clash');
    const base = await r.commit({ README: 'hello\n' });
    const stable = await r.commit({ 'stable.txt': 'stable\n' }, { branch: 'stable' });
    expect(await ops.resolveRef(r.srv, 'stable')).toBe(stable);
    await r.bookmark('stable', base);
    expect(await ops.resolveRef(r.srv, 'stable')).toBe(base);
    await expect(ops.checkMerge(r.srv, 'stable', 'nope')).rejects.toMatchObject({
      role: 'target',
      ref: 'nope',
    });
    await expect(ops.checkMerge(r.srv, 'nope', 'stable')).rejects.toThrow(RefNotFound);
  });

  test('an empty repository: @ names nothing', async () => {
    const r = await fresh('empty');
    expect(await ops.resolveRefs(r.srv, ['@', 'default'])).toEqual([undefined, undefined]);
  });

  test('refHeads and headMoves: named branches (newest head, closed ones count), @ while there is no bookmark, bookmarks over both', async () => {
    const r = await fresh('heads');
    const before = await driver.snapshot(r.srv);
    expect(driver.refHeads(before)).toEqual(new Map());
    const base = await r.commit({ README: 'hello\n' });
    const stable = await r.commit({ 'stable.txt': 'stable\n' }, { branch: 'stable' });
    const closed = await (async () => {
      await r.hg('commit', '-q', '--close-branch', '-m', 'close stable');
      await sh(HG, ['push', '-q', '-f', r.srv], path.join(root, 'heads-work'));
      return (await r.hg('log', '-r', '.', '-T', '{node}')).trim();
    })();
    const second = await r.commit({ 'second.txt': 'second\n' }, { from: base, branch: 'default' });
    const first = await r.commit({ 'first.txt': 'first\n' }, { from: base });
    await r.bookmark('mark', base);
    const one = await driver.snapshot(r.srv);
    expect(one.branches.get('default')).toBe(`${second},${first}`);
    expect(driver.refHeads(one)).toEqual(
      new Map([
        ['default', first],
        ['stable', closed],
        ['@', first],
        ['mark', base],
      ]),
    );
    expect(headMoves(driver, before, one)).toEqual(
      new Map([
        ['default', { oldHead: '', head: first }],
        ['stable', { oldHead: '', head: closed }],
        ['@', { oldHead: '', head: first }],
        ['mark', { oldHead: '', head: base }],
      ]),
    );
    expect(stable).not.toBe(closed);

    // a bookmark named @ takes over; a bookmark named like a branch hides it
    await r.bookmark('@', second);
    await r.bookmark('stable', base);
    const two = await driver.snapshot(r.srv);
    expect(driver.refHeads(two).get('@')).toBe(second);
    expect(driver.refHeads(two).get('stable')).toBe(base);
    expect(headMoves(driver, one, two)).toEqual(
      new Map([
        ['@', { oldHead: first, head: second }],
        ['stable', { oldHead: closed, head: base }],
      ]),
    );
  });
});
