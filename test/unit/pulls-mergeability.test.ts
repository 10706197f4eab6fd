import { describe, expect, test } from '@jest/globals';
import { Mergeability } from '../../src/pulls/mergeability.ts';
import { RefNotFound, type MergeCheck, type VcsOps } from '../../src/vcs/ops.ts';

/**
 * The mergeability cache and its time budget, over a stand-in for the VCS operations whose
 * heads and dry runs the test controls (the real operations are covered by the vcs-ops tests and
 * the pull request integration tests).
 */
function world() {
  const heads = new Map<string, string>([
    ['feature', 'a'.repeat(40)],
    ['main', 'b'.repeat(40)],
  ]);
  const pending: (() => void)[] = [];
  let checks = 0;
  let resolves = 0;
  let hold = false;
  const ops = {
    kind: 'git',
    resolveRefs: (_dir: string, names: string[]) => {
      resolves += 1;
      return Promise.resolve(names.map((n) => heads.get(n)));
    },
    checkMerge: async (_dir: string, source: string, target: string): Promise<MergeCheck> => {
      checks += 1;
      const sourceHead = heads.get(source);
      const targetHead = heads.get(target);
      if (sourceHead === undefined) throw new RefNotFound('source', source);
      if (targetHead === undefined) throw new RefNotFound('target', target);
      if (hold) await new Promise<void>((resolve) => pending.push(resolve));
      return {
        state: 'clean',
        conflictedFiles: [],
        commitsAhead: 1,
        commitsBehind: 0,
        sourceHead,
        targetHead,
      };
    },
  } as unknown as VcsOps;
  return {
    heads,
    checks: () => checks,
    resolves: () => resolves,
    hold: (on: boolean) => (hold = on),
    release: () => pending.splice(0).forEach((r) => r()),
    m: (budgetMs: number, maxEntries?: number) =>
      new Mergeability({ ops: () => ops, budgetMs, ...(maxEntries === undefined ? {} : { maxEntries }) }),
  };
}
const repo = { vcs: 'git' as const, path: '/r' };

describe('Mergeability', () => {
  test('a check over its budget answers checking, runs once for concurrent readers, and its result is cached', async () => {
    const w = world();
    const m = w.m(5);
    w.hold(true);
    const [a, b] = await Promise.all([m.read(repo, 'feature', 'main'), m.read(repo, 'feature', 'main')]);
    expect(a).toEqual({
      ok: true,
      check: expect.objectContaining({ mergeable_state: 'checking', head_commit: 'a'.repeat(40) }),
    });
    expect(b).toEqual(a);
    expect(w.checks()).toBe(1);
    w.release();
    await new Promise((r) => setTimeout(r, 20));
    const c = await m.read(repo, 'feature', 'main');
    expect(c).toEqual({
      ok: true,
      check: expect.objectContaining({ mergeable_state: 'clean', commits_ahead: 1 }),
    });
    expect(w.checks()).toBe(1);
  });

  test('a moved head is a new key: checked again, never the old answer', async () => {
    const w = world();
    const m = w.m(60_000);
    await m.read(repo, 'feature', 'main');
    w.heads.set('main', 'c'.repeat(40));
    const r = await m.read(repo, 'feature', 'main');
    expect(r).toEqual({ ok: true, check: expect.objectContaining({ base_commit: 'c'.repeat(40) }) });
    expect(w.checks()).toBe(2);
  });

  test('the least recently used entry leaves first; a missing ref is named', async () => {
    const w = world();
    const m = w.m(60_000, 1);
    await m.read(repo, 'feature', 'main');
    await m.read({ vcs: 'git', path: '/other' }, 'feature', 'main');
    await m.read(repo, 'feature', 'main');
    expect(w.checks()).toBe(3);
    expect(await m.read(repo, 'nope', 'main')).toEqual({ ok: false, missing: 'source' });
    expect(await m.read(repo, 'feature', 'gone')).toEqual({ ok: false, missing: 'target' });
  });

  test('a page of pairs resolves all its refs with one VCS call and answers each pair in order', async () => {
    const w = world();
    w.heads.set('other', 'c'.repeat(40));
    const m = w.m(60_000);
    const pairs = [
      { source: 'feature', target: 'main' },
      { source: 'other', target: 'main' },
      { source: 'nope', target: 'main' },
      { source: 'feature', target: 'gone' },
      { source: 'other', target: 'main' },
    ];
    const answers = await m.readMany(repo, pairs);
    expect(w.resolves()).toBe(1);
    expect(answers.map((a) => (a.ok ? a.check.head_commit : a.missing))).toEqual([
      'a'.repeat(40),
      'c'.repeat(40),
      'source',
      'target',
      'c'.repeat(40),
    ]);
    expect(answers[0]).toEqual(await m.read(repo, 'feature', 'main'));
    expect(await m.readMany(repo, [])).toEqual([]);
    expect(w.resolves()).toBe(2); // the single read; none for an empty page
  });
});
