import { afterAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Spool } from '../../src/vcs/process/spool.ts';

const roots: string[] = [];
async function root(): Promise<string> {
  const r = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-spool-unit-'));
  roots.push(r);
  return r;
}
afterAll(async () => {
  for (const r of roots) await fs.rm(r, { recursive: true, force: true });
});

/** What `os.removedirs` (Mercurial's `util.tryrmdir`) does: the directory, then each empty parent. */
async function removeDirs(dir: string): Promise<void> {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      await fs.rmdir(d);
    } catch {
      return;
    }
  }
}

describe('Spool', () => {
  test('when a backend removes its temporary directory and every empty parent, then the process directory stays and the next workspace is made', async () => {
    const spool = new Spool(await root());
    const ws = await spool.workspace();
    const tmp = path.join(ws.dir, 'tmp', 'hg-clone-x');
    await fs.mkdir(tmp, { recursive: true });
    await removeDirs(tmp);
    const next = await spool.workspace();
    expect(path.dirname(next.dir)).toBe(path.dirname(ws.dir));
    await expect(fs.stat(next.dir)).resolves.toBeTruthy();
    await ws.remove();
    await next.remove();
  });

  test('when the process directory is removed from outside, then the next workspace makes it again', async () => {
    const r = await root();
    const spool = new Spool(r);
    const ws = await spool.workspace();
    await fs.rm(path.dirname(ws.dir), { recursive: true });
    const next = await spool.workspace();
    expect(path.dirname(path.dirname(next.dir))).toBe(r);
    expect((await fs.readdir(path.dirname(next.dir))).sort()).toEqual([path.basename(next.dir), 'scripts']);
    expect(await spool.scriptDir()).toBe(path.join(path.dirname(next.dir), 'scripts'));
    await next.remove();
  });
});
