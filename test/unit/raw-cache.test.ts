import { afterAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { RawCache } from '../../src/repos/raw-cache.ts';

const dirs: string[] = [];
async function cacheDir(): Promise<string> {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-raw-cache-unit-'));
  dirs.push(d);
  return d;
}
afterAll(async () => {
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

const bytes = (n: number, fill: number) => Buffer.alloc(n, fill);
const source = (b: Buffer) => () =>
  Promise.resolve(Readable.from([b.subarray(0, b.length >> 1), b.subarray(b.length >> 1)]));

/** Puts and waits until the write is over (kept or not). */
async function put(
  c: RawCache,
  object: string,
  b: Buffer,
  size: number | undefined = b.length,
): Promise<void> {
  c.put('/repos/1.git', object, size, source(b));
  await c.settled();
}

const kept = async (c: RawCache, object: string) => {
  const hit = await c.get('/repos/1.git', object, undefined);
  return hit === undefined ? undefined : (await fs.readFile(hit.file))[0];
};

describe('RawCache', () => {
  test('when files are put beyond the cap, then the least recently used go first and a file above a quarter of the cap is never kept', async () => {
    const c = new RawCache({ dir: await cacheDir(), maxBytes: 4000 });
    for (const [i, o] of ['a', 'b', 'c', 'd'].entries()) await put(c, o, bytes(1000, i + 1));
    expect(await kept(c, 'a')).toBe(1); // a is now the most recently used
    await put(c, 'e', bytes(1000, 5));
    expect(await Promise.all(['a', 'b', 'c', 'd', 'e'].map((o) => kept(c, o)))).toEqual([
      1,
      undefined,
      3,
      4,
      5,
    ]);
    await put(c, 'big', bytes(1001, 9));
    expect(await kept(c, 'big')).toBeUndefined();
    expect(c.keeps(1000)).toBe(true);
    expect(c.keeps(1001)).toBe(false);
  });

  test('when a file is asked for with another size than kept, or the bytes put are not the size announced, then it is not served', async () => {
    const c = new RawCache({ dir: await cacheDir(), maxBytes: 4000 });
    await put(c, 'a', bytes(10, 1));
    expect(await c.get('/repos/1.git', 'a', 11)).toBeUndefined();
    expect(await c.get('/repos/1.git', 'a', 10)).toBeUndefined(); // dropped
    await put(c, 'b', bytes(10, 2), 12);
    expect(await kept(c, 'b')).toBeUndefined();
    await put(c, 'b', bytes(10, 2));
    expect(await c.get('/repos/1.git', 'b', 10)).toEqual({ file: expect.any(String), size: 10 });
    expect(await c.get('/repos/2.git', 'b', 10)).toBeUndefined(); // another repository's
  });

  test('when a kept file is removed or changed from outside, then it is not served, and put again it is kept', async () => {
    const c = new RawCache({ dir: await cacheDir(), maxBytes: 4000 });
    await put(c, 'a', bytes(10, 1));
    await put(c, 'b', bytes(10, 2));
    await fs.rm((await c.get('/repos/1.git', 'a', 10))!.file);
    await fs.appendFile((await c.get('/repos/1.git', 'b', 10))!.file, 'x');
    expect(await c.get('/repos/1.git', 'a', 10)).toBeUndefined();
    expect(await c.get('/repos/1.git', 'b', undefined)).toBeUndefined();
    await put(c, 'a', bytes(10, 1));
    expect(await kept(c, 'a')).toBe(1);
  });

  test('when the directory cannot be made or others may write to it, then nothing is kept or served and nothing throws', async () => {
    const base = await cacheDir();
    await fs.writeFile(path.join(base, 'file'), 'x');
    const blocked = new RawCache({ dir: path.join(base, 'file', 'cache'), maxBytes: 4000 });
    await put(blocked, 'a', bytes(10, 1));
    await expect(blocked.get('/repos/1.git', 'a', 10)).resolves.toBeUndefined();

    const open = path.join(base, 'open');
    await fs.mkdir(open, { mode: 0o777 });
    await fs.chmod(open, 0o777);
    const shared = new RawCache({ dir: open, maxBytes: 4000 });
    await put(shared, 'a', bytes(10, 1));
    expect(await shared.get('/repos/1.git', 'a', 10)).toBeUndefined();
    expect(await fs.readdir(open)).toEqual([]);
  });

  test('when a repository is forgotten, then its files go and another repository keeps its own', async () => {
    const dir = await cacheDir();
    const c = new RawCache({ dir, maxBytes: 4000 });
    await put(c, 'a', bytes(10, 1));
    c.put('/repos/2.git', 'a', 10, source(bytes(10, 2)));
    await c.settled();
    expect(await fs.readdir(dir)).toHaveLength(2);
    await c.forget('/repos/1.git');
    expect(await c.get('/repos/1.git', 'a', 10)).toBeUndefined();
    expect(await fs.readFile((await c.get('/repos/2.git', 'a', 10))!.file)).toEqual(bytes(10, 2));
    expect(await fs.readdir(dir)).toHaveLength(1);
  });

  test('when a new cache opens a directory, then it keeps what is there in the order of its use and removes unfinished writes', async () => {
    const dir = await cacheDir();
    const first = new RawCache({ dir, maxBytes: 4000 });
    for (const [i, o] of ['a', 'b', 'c'].entries()) await put(first, o, bytes(1000, i + 1));
    const old = new Date(Date.now() - 60_000);
    for (const name of await fs.readdir(dir, { recursive: true }))
      await fs.utimes(path.join(dir, name), old, old);
    expect(await kept(first, 'a')).toBe(1); // used: its time is now
    // (written in the background: the new cache must see it)
    const recent = async () => {
      for (const name of await fs.readdir(dir, { recursive: true })) {
        const st = await fs.stat(path.join(dir, name));
        if (st.isFile() && st.mtimeMs > old.getTime() + 30_000) return true;
      }
      return false;
    };
    for (let i = 0; i < 100 && !(await recent()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(await recent()).toBe(true);
    await fs.writeFile(path.join(dir, '.writing-abc'), 'half');

    const second = new RawCache({ dir, maxBytes: 2500 }); // one must go: b or c, not a
    expect(await kept(second, 'a')).toBe(1);
    expect((await fs.readdir(dir)).filter((n) => n.startsWith('.'))).toEqual([]);
    const left = await Promise.all(['b', 'c'].map((o) => kept(second, o)));
    expect(left.filter((v) => v !== undefined)).toHaveLength(1);
  });
});
