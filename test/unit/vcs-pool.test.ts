import { describe, expect, test } from '@jest/globals';
import { ProcessPool, type PoolGroup, type Pooled } from '../../src/vcs/process/pool.ts';

/** Entries that record their closing in `closed`; `busy` and `dead` as the test sets them. */
const fake = () => {
  const closed: string[] = [];
  const open = (name: string) => {
    const e = { busy: false, dead: false };
    const entry: Pooled & { state: typeof e } = {
      state: e,
      busy: () => e.busy,
      close: () => closed.push(name),
      get dead() {
        return e.dead;
      },
    };
    return entry;
  };
  return { closed, open };
};

describe('ProcessPool', () => {
  // (the readers' pool before the pools became one: the same two tests)
  test('keeps at most max readers, evicting the least recently used', () => {
    const { closed, open } = fake();
    const pool = new ProcessPool();
    const group = { name: 'reader', max: 2, idleMs: 60_000 };
    const get = (p: string) => pool.get(group, p, () => open(p));
    const a = get('/a');
    get('/b');
    expect(get('/a')).toBe(a);
    get('/c');
    expect(closed).toEqual(['/b']);
    expect(pool.size()).toBe(2);
    pool.close();
    expect(closed.sort()).toEqual(['/a', '/b', '/c']);
  });

  test('closes idle readers and invalidated ones', () => {
    const { closed, open } = fake();
    const pool = new ProcessPool();
    const group = { name: 'reader', max: 10, idleMs: 1000 };
    const get = (p: string) => pool.get(group, p, () => open(p));
    const a = get('/a');
    get('/b');
    pool.invalidate('/b');
    expect(closed).toEqual(['/b']);
    pool.evictIdle(Date.now() + 5000);
    expect(closed).toEqual(['/b', '/a']);
    expect(get('/a')).not.toBe(a);
    pool.close();
  });

  test('groups: each its own cap and idle time; invalidation spares those that see changes', () => {
    const { closed, open } = fake();
    const pool = new ProcessPool();
    const small: PoolGroup = { name: 'small', max: 1, idleMs: 1000 };
    const fresh: PoolGroup = { name: 'fresh', max: 4, idleMs: 10_000, survivesChange: true };
    pool.get(small, '/a', () => open('small /a'));
    pool.get(fresh, '/a', () => open('fresh /a'));
    pool.get(fresh, '/b', () => open('fresh /b'));
    expect(closed).toEqual([]);
    pool.get(small, '/b', () => open('small /b'));
    expect(closed).toEqual(['small /a']);
    expect([pool.size(small), pool.size(fresh), pool.size()]).toEqual([1, 2, 3]);
    pool.invalidate('/b');
    expect(closed).toEqual(['small /a', 'small /b']);
    pool.evictIdle(Date.now() + 5000);
    expect(pool.size(fresh)).toBe(2);
    pool.evictIdle(Date.now() + 20_000);
    expect(pool.size()).toBe(0);
    expect(closed.slice(2).sort()).toEqual(['fresh /a', 'fresh /b']);
  });

  test('a busy entry is not closed as idle; a dead one is replaced; drop closes only the entry given', () => {
    const { closed, open } = fake();
    const pool = new ProcessPool();
    const group: PoolGroup = { name: 'g', idleMs: 1000 };
    const a = pool.get(group, '/a', () => open('a1'));
    a.state.busy = true;
    pool.evictIdle(Date.now() + 5000);
    expect(closed).toEqual([]);
    a.state.busy = false;
    a.state.dead = true;
    const a2 = pool.get(group, '/a', () => open('a2'));
    expect(a2).not.toBe(a);
    expect(closed).toEqual(['a1']);
    pool.drop(group, '/a', a);
    expect(pool.size()).toBe(1);
    pool.drop(group, '/a', a2);
    expect([pool.size(), closed]).toEqual([0, ['a1', 'a2']]);
    pool.close();
  });
});
