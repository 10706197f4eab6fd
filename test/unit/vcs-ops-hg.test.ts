import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import { HgOps } from '../../src/vcs/hg/ops.ts';
import { InvalidRefName } from '../../src/vcs/ops.ts';
import { VcsTimeout } from '../../src/vcs/process/run.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { BOB, hgIn, OPS_BASE, opsSuite } from '../helpers/vcs-ops.ts';

/** What only Mercurial has; the cases every kind has are in vcs-ops.test.ts. */
describe('hg operations', () => {
  const c = opsSuite('hg', OPS_BASE);
  const onSrv = (...args: string[]) => hgIn(c.fx, 'srv', ...args);

  test('merging into @ moves @; the repository keeps no working directory and no active bookmark', async () => {
    const { fx, ops } = c;
    const s = await fx.commit('s-main', c.main, { 'main.txt': 'm\n' });
    const m = await ops.merge(fx.srv, { source: 's-main', target: '@', style: 'merge', author: BOB });
    expect(m).toEqual({ kind: 'merged', mergeCommit: s, fastForward: true });
    expect(await ops.resolveRef(fx.srv, '@')).toBe(s);
    c.base = s;
    expect(await fs.readdir(fx.srv)).toEqual(['.hg']);
    await expect(fs.access(path.join(fx.srv, '.hg', 'bookmarks.current'))).rejects.toThrow();
    expect((await onSrv('log', '-r', 'wdir()', '-T', '{p1.rev}')).trim()).toBe('-1');
  });

  test('a source on another named branch is merged with a merge commit, never fast-forwarded', async () => {
    const { fx, ops } = c;
    const t = await c.line('t-named');
    const work = path.join(fx.root, 'work');
    const hg = (...a: string[]) => hgIn(fx, 'work', ...a);
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
    const { fx } = c;
    await c.line('t-hook');
    await fx.commit('s-hook', c.base, { 'k.txt': 'k\n' });
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

  test('createTag commits .hgtags on @ when the target is in its history (and @ moves)', async () => {
    const { fx, ops, base } = c;
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
    c.base = r.tagCommit ?? '';
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
    c.base = r2.tagCommit ?? '';
  });

  test('createTag off @ goes on the head of the target line, and its bookmark moves', async () => {
    const { fx, ops, base } = c;
    const s = await fx.commit('s-rel', base, { 'r.txt': 'r\n' });
    const r = await ops.createTag(fx.srv, { name: 'rel-1', target: s.slice(0, 12), author: BOB });
    if (r.kind !== 'created') throw new Error(JSON.stringify(r));
    expect(r.commit).toBe(s);
    expect(await fx.parents(r.tagCommit ?? '')).toEqual([s]);
    expect(await ops.resolveRef(fx.srv, 's-rel')).toBe(r.tagCommit);
    expect(await ops.resolveRef(fx.srv, '@')).toBe(base);
  });

  test('createTag: not_found, invalid names', async () => {
    const { fx, ops, base } = c;
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

  test('a request over its time limit kills the command server; the next call starts a new one', async () => {
    const { fx, ops, set } = c;
    const own = new ProcessPool();
    const slow = new HgOps({ timeoutMs: 1, pool: own });
    await expect(slow.checkMerge(fx.srv, '@', '@')).rejects.toThrow(VcsTimeout);
    expect(slow.size()).toBe(0);
    own.close();
    const hgops = set.ops('hg') as HgOps;
    expect(hgops.size()).toBe(1);
    set.closeProcesses();
    expect(hgops.size()).toBe(0);
    expect(await ops.resolveRef(fx.srv, '@')).toBe(c.base);
  });
});
