import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import net from 'node:net';
import { commandStream, commandToSocket, openFile, openFileClosing } from '../../src/vcs/process/stream.ts';

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

/** A connected pair of TCP sockets on loopback: the server's end and the client's. */
async function tcpPair(): Promise<{ server: net.Socket; client: net.Socket; close: () => void }> {
  const listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<net.Socket>((resolve) => listener.once('connection', resolve));
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  const server = await accepted;
  return {
    server,
    client,
    close: () => {
      server.destroy();
      client.destroy();
      listener.close();
    },
  };
}

/** Is the descriptor of `socket` (its libuv handle's) non-blocking? */
async function nonBlocking(socket: net.Socket): Promise<boolean> {
  const fd = (socket as unknown as { _handle: { fd: number } })._handle.fd;
  const flags = /^flags:\s+(\d+)$/m.exec(await fs.readFile(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] ?? '0';
  return (parseInt(flags, 8) & 0o4000) !== 0;
}

/** Writes `n` zero bytes (forever without `n`) to its non-blocking standard output, as git does: poll on EAGAIN. */
const WRITER = [
  'import os, select, sys',
  'n = int(sys.argv[1]) if len(sys.argv) > 1 else -1',
  'p = select.poll()',
  'p.register(1, select.POLLOUT)',
  'while n != 0:',
  '    try:',
  '        w = os.write(1, bytes(65536 if n < 0 else min(n, 65536)))',
  '    except BlockingIOError:',
  '        p.poll()',
  '        continue',
  '    n = n - w if n > 0 else n',
].join('\n');

describe('commandToSocket (raw downloads handed to the producer)', () => {
  test('the command writes to the socket; the server keeps it non-blocking and reads from it again afterwards', async () => {
    const { server, client, close } = await tcpPair();
    try {
      const got: Buffer[] = [];
      client.on('data', (c: Buffer) => got.push(c));
      const big = 16 * 1024 * 1024; // more than a socket buffer: the writer meets EAGAIN
      await commandToSocket('python3', ['-c', WRITER, String(big)], process.env, 0, server);
      expect(await nonBlocking(server)).toBe(true);
      while (got.reduce((n, c) => n + c.length, 0) < big) await new Promise((r) => setTimeout(r, 20));
      const bytes = Buffer.concat(got);
      expect([bytes.length, bytes.equals(Buffer.alloc(big))]).toEqual([big, true]);
      const next = new Promise<Buffer>((resolve) => server.once('data', resolve));
      client.write('next request');
      expect((await next).toString()).toBe('next request');
    } finally {
      close();
    }
  });

  test('a command that fails rejects with its exit code', async () => {
    const { server, close } = await tcpPair();
    try {
      await expect(
        commandToSocket('sh', ['-c', 'printf x; exit 3'], process.env, 0, server),
      ).rejects.toMatchObject({
        code: 3,
      });
    } finally {
      close();
    }
  });

  test('a client gone ends the command (its promise settles on its exit)', async () => {
    const { server, client, close } = await tcpPair();
    try {
      client.pause(); // reads nothing: the writer fills the socket and waits for room
      const done = commandToSocket('python3', ['-c', WRITER], process.env, 0, server).catch(
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 200));
      client.destroy();
      server.destroy();
      expect(await done).toBeInstanceOf(Error);
    } finally {
      close();
    }
  });
});

/** Python writing `n` bytes 0, 1, ... 255, 0, ... to its standard output with ordinary buffered writes. */
const PATTERN =
  'import sys\nn = int(sys.argv[1])\nsys.stdout.buffer.write((bytes(range(256)) * (n // 256 + 1))[:n])';
const pattern = (n: number) =>
  Buffer.concat(
    Array.from({ length: Math.ceil(n / 256) }, () => Buffer.from([...Array(256).keys()])),
  ).subarray(0, n);

describe('openFileClosing (Fossil raw downloads: the pipe handed on to cat)', () => {
  test('every byte reaches the socket in order, the connection is left blocking and marked to close', async () => {
    const { server, client, close } = await tcpPair();
    try {
      const size = 8 * 1024 * 1024;
      const got: Buffer[] = [];
      client.on('data', (c: Buffer) => got.push(c));
      const file = await openFileClosing('python3', ['-c', PATTERN, String(size)], process.env, 0, {
        size,
        head: 8000,
        what: 'test',
        socket: server,
      });
      expect([file.size, file.head.equals(pattern(8000)), file.closes]).toEqual([size, true, true]);
      await file.handOff?.();
      expect(await nonBlocking(server)).toBe(false);
      server.destroy();
      await new Promise<void>((resolve) => client.once('close', () => resolve()));
      const bytes = Buffer.concat(got);
      expect([bytes.length, bytes.equals(pattern(size))]).toEqual([size, true]);
    } finally {
      close();
    }
  });

  test('a file read whole with its head is sent from memory: no hand-off, the connection kept', async () => {
    const { server, close } = await tcpPair();
    try {
      const file = await openFileClosing('python3', ['-c', PATTERN, '100'], process.env, 0, {
        size: 100,
        head: 8000,
        what: 'test',
        socket: server,
      });
      expect([file.handOff, file.closes]).toEqual([undefined, undefined]);
      const chunks: Buffer[] = [];
      for await (const c of file.body) chunks.push(c);
      expect(Buffer.concat(chunks).equals(pattern(100))).toBe(true);
      expect(await nonBlocking(server)).toBe(true);
    } finally {
      close();
    }
  });

  test('a command that fails after writing rejects the hand-off with its exit code', async () => {
    const { server, client, close } = await tcpPair();
    try {
      client.resume();
      const cmd = `python3 -c "$0" 1000000; exit 3`;
      const file = await openFileClosing('sh', ['-c', cmd, PATTERN], process.env, 0, {
        size: 1_000_000,
        head: 8000,
        what: 'test',
        socket: server,
      });
      await expect(file.handOff?.()).rejects.toMatchObject({ code: 3 });
    } finally {
      close();
    }
  });

  test('a client gone ends the hand-off (cat and the command killed)', async () => {
    const { server, client, close } = await tcpPair();
    try {
      client.pause(); // reads nothing: cat fills the socket and waits
      const file = await openFileClosing('cat', ['/dev/zero'], process.env, 0, {
        size: 1e12,
        head: 8000,
        what: 'test',
        socket: server,
      });
      const done = file.handOff?.().catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 200));
      client.destroy();
      server.destroy();
      expect(await done).toBeInstanceOf(Error);
    } finally {
      close();
    }
  });
});
