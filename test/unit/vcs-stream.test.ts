import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import { commandStream, openFile } from '../../src/vcs/stream.ts';

/** A process that exists and is not a zombie. */
const alive = async (pid: number) => {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !/^\d+ \(.*\) Z/.test(stat);
};

const sh = (script: string) => commandStream('sh', ['-c', script], process.env, 0);

async function all(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(c);
  return Buffer.concat(parts);
}

describe('openFile (raw downloads)', () => {
  test('with the size known, the head is the first bytes and the body every byte', async () => {
    const f = await openFile(sh('printf abcdefgh'), { size: 8, head: 3, what: 'test' });
    expect(f.size).toBe(8);
    expect(f.head.toString()).toBe('abc');
    expect((await all(f.body)).toString()).toBe('abcdefgh');
  });

  test('without it, the first line is the size; a file shorter than the head is whole in it', async () => {
    const f = await openFile(sh('printf "5\\n\\001\\nabc"'), { head: 8000, what: 'test' });
    expect(f.size).toBe(5);
    expect(f.head).toEqual(Buffer.from('\u0001\nabc'));
    expect(await all(f.body)).toEqual(Buffer.from('\u0001\nabc'));
    const empty = await openFile(sh('printf "0\\n"'), { head: 8000, what: 'test' });
    expect(empty.size).toBe(0);
    expect(await all(empty.body)).toEqual(Buffer.alloc(0));
  });

  test('a process that writes fewer or more bytes than the size, or no size line, fails the body or the open', async () => {
    const short = await openFile(sh('printf abc'), { size: 5, head: 2, what: 'test' });
    await expect(all(short.body)).rejects.toThrow('test: 3 bytes, 5 announced');
    const long = await openFile(sh('printf "2\\nabc"'), { head: 1, what: 'test' });
    await expect(all(long.body)).rejects.toThrow('more than the 2 bytes announced');
    await expect(openFile(sh('printf "x\\nabc"'), { head: 1, what: 'test' })).rejects.toThrow(
      'bad size line',
    );
    await expect(openFile(sh('exit 0'), { head: 1, what: 'test' })).rejects.toThrow('no size line');
    // a failing command fails the body (its exit code comes after its output)
    const failed = await openFile(sh('printf ab; exit 3'), { size: 2, head: 1, what: 'test' });
    await expect(all(failed.body)).rejects.toThrow('sh -c failed');
  });

  test('ending a body that was never read kills the process (a response that never started)', async () => {
    // the process writes its pid as the file and then waits, as a reader blocked on a full pipe
    const f = await openFile(sh('printf "%010d\\n" $$; exec sleep 60'), { size: 40, head: 11, what: 'test' });
    const pid = Number(f.head.toString().trim());
    expect(await alive(pid)).toBe(true);
    await f.body[Symbol.asyncIterator]().return?.();
    let up = await alive(pid);
    for (let i = 0; i < 100 && up; i++) {
      await new Promise((r) => setTimeout(r, 100));
      up = await alive(pid);
    }
    expect(up).toBe(false);
  });
});
