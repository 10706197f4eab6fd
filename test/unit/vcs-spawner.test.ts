import { afterAll, describe, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net, { type AddressInfo, type Socket } from 'node:net';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { output } from '../../src/vcs/refs.ts';
import { runCommand, VcsCommandFailed, VcsTimeout } from '../../src/vcs/process/run.ts';
import { closeSpawner, spawnChild, spawnerPid, type Child } from '../../src/vcs/process/spawner.ts';
import { PersistentProcess } from '../../src/vcs/process/process.ts';
import { exited, NODE, ROOT } from '../helpers/process.ts';
import { startTestServer } from '../helpers/server.ts';

/** A process that exists and is not a zombie (an orphan killed here may wait for its reaper). */
const alive = async (pid: number) => {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !/^\d+ \(.*\) Z/.test(stat);
};
const ppidOf = (stat: string) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
/** Waits (generously) until `pid` is gone; answers whether it is. */
const gone = async (pid: number) => {
  for (let i = 0; i < 500 && (await alive(pid)); i++) await new Promise((r) => setTimeout(r, 20));
  return !(await alive(pid));
};
/** Waits for a file a command writes, and answers its content. */
const readWhenWritten = async (file: string) => {
  for (let i = 0; i < 1500; i++) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    if (text.endsWith('\n')) return text.trim();
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${file} was not written`);
};
/** The command's own /proc/<pid>/stat, as the command sees it. */
const ownStat = async () =>
  (await runCommand('sh', ['-c', 'cat /proc/$$/stat'], { timeoutMs: 30_000 })).stdout.toString('utf8');

const dirs: string[] = [];
const tempDir = async () => {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-spawner-'));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  await closeSpawner();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

/**
 * Runs `script` (an ES module) as a process of its own, as a server or a CLI command would be,
 * killed after 30 s: its exit and what it wrote to stdout. A script that ends by itself exits 0.
 */
async function runScript(script: string): Promise<{ exit: Awaited<ReturnType<typeof exited>>; out: string }> {
  const proc = spawn(NODE, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const limit = setTimeout(() => proc.kill('SIGKILL'), 30_000);
  try {
    return { exit: await exited(proc), out };
  } finally {
    clearTimeout(limit);
  }
}

describe('the spawner', () => {
  test('starts the commands: their parent is the spawner, not this process', async () => {
    const stat = await ownStat();
    const spawner = spawnerPid();
    expect(spawner).toBeDefined();
    expect(spawner).not.toBe(process.pid);
    expect(ppidOf(stat)).toBe(spawner);
    // one spawner for all calls
    await Promise.all([ownStat(), ownStat(), ownStat()]);
    expect(spawnerPid()).toBe(spawner);
  });

  test('`output` answers stdout and throws VcsCommandFailed on a non-zero exit, through the spawner too', async () => {
    const stat = await output('sh', ['-c', 'cat /proc/$$/stat'], process.env);
    expect(ppidOf(stat)).toBe(spawnerPid());
    await expect(output('sh', ['-c', 'echo no >&2; exit 4'], process.env)).rejects.toMatchObject({
      code: 4,
      stderr: 'no\n',
    });
    await expect(output('sh', ['-c', 'exit 4'], process.env)).rejects.toThrow(VcsCommandFailed);
    await expect(output('/nonexistent/tool', [], process.env)).rejects.toThrow(VcsCommandFailed);
  });

  test('a timeout still kills the whole process group', async () => {
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    await expect(
      runCommand('sh', ['-c', `sleep 60 & echo $! > '${pidFile}'; wait`], { timeoutMs: 300 }),
    ).rejects.toThrow(VcsTimeout);
    expect(await gone(Number(await readWhenWritten(pidFile)))).toBe(true);
  });

  test('killed: the calls under way fail, their groups die, and the next call starts a new spawner', async () => {
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    const running = runCommand('sh', ['-c', `sleep 60 & echo $! > '${pidFile}'; wait`], {
      timeoutMs: 60_000,
    });
    const helper = Number(await readWhenWritten(pidFile));
    // The command can write its file before the spawner has told this process its pid (the
    // spawner reports it after spawn returns); a call through the same channel answered after
    // that report makes sure it arrived, as the report of a command started earlier always has.
    await ownStat();
    const first = spawnerPid()!;
    process.kill(first, 'SIGKILL');
    await expect(running).rejects.toThrow(VcsCommandFailed);
    expect(await gone(first)).toBe(true);
    expect(await gone(helper)).toBe(true);

    const stat = await ownStat();
    expect(spawnerPid()).toBeDefined();
    expect(spawnerPid()).not.toBe(first);
    expect(ppidOf(stat)).toBe(spawnerPid());
  });

  test('a server that closes ends its spawner', async () => {
    const server = await startTestServer();
    await ownStat();
    const pid = spawnerPid()!;
    expect(await alive(pid)).toBe(true);
    await server.close();
    expect(spawnerPid()).toBeUndefined();
    expect(await gone(pid)).toBe(true);
  });

  test('an idle spawner does not keep its server process running', async () => {
    const run = pathToFileURL(path.join(ROOT, 'src/vcs/process/run.ts')).href;
    const script = `
      import { runCommand } from '${run}';
      const r = await runCommand('sh', ['-c', 'echo done'], { timeoutMs: 60000 });
      process.stdout.write(r.stdout);
    `;
    expect(await runScript(script)).toEqual({ exit: { code: 0, signal: null }, out: 'done\n' });
  });

  test('a server process that dies takes its spawner and the commands it runs with it', async () => {
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    const spawnerFile = path.join(dir, 'spawner');
    const run = pathToFileURL(path.join(ROOT, 'src/vcs/process/run.ts')).href;
    const spawnerTs = pathToFileURL(path.join(ROOT, 'src/vcs/process/spawner.ts')).href;
    const script = `
      import fs from 'node:fs';
      import { runCommand } from '${run}';
      import { spawnerPid } from '${spawnerTs}';
      const p = runCommand('sh', ['-c', "sleep 60 & echo $! > '${pidFile}'; wait"], { timeoutMs: 60000 });
      fs.writeFileSync('${spawnerFile}', spawnerPid() + '\\n');
      await p;
    `;
    const server = spawn(NODE, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    try {
      const helper = Number(await readWhenWritten(pidFile));
      const spawner = Number(await readWhenWritten(spawnerFile));
      server.kill('SIGKILL');
      await exited(server);
      expect(await gone(spawner)).toBe(true);
      expect(await gone(helper)).toBe(true);
    } finally {
      server.kill('SIGKILL');
    }
  });
});

/** Every byte a socket gives until it ends. */
const readAll = async (s: Socket | null) => {
  const parts: Buffer[] = [];
  for await (const d of s as AsyncIterable<Buffer>) parts.push(d);
  return Buffer.concat(parts);
};

/**
 * Runs `fn` with both ends of a loopback TCP connection: `conn` as a server accepted it (the side
 * given to processes), `client` the other; everything is closed afterwards.
 */
async function withConnection(fn: (client: Socket, conn: Socket) => Promise<void>): Promise<void> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  const conn = await accepted;
  try {
    await fn(client, conn);
  } finally {
    client.destroy();
    conn.destroy();
    server.close();
  }
}

describe('spawnChild: processes whose streams the server uses itself', () => {
  test('its parent is the spawner; what it writes arrives byte for byte, what it reads is what was written', async () => {
    const dir = await tempDir();
    const data = randomBytes(8 * 1024 * 1024 + 13);
    await fs.writeFile(path.join(dir, 'data'), data);
    const cat = await spawnChild('cat', [path.join(dir, 'data')], { stdio: ['ignore', 'pipe', 'collect'] });
    expect(cat.pid).not.toBe(process.pid);
    const stat = await fs.readFile(`/proc/${cat.pid}/stat`, 'utf8').catch(() => '');
    if (stat !== '') expect(ppidOf(stat)).toBe(spawnerPid());
    expect((await readAll(cat.stdout)).equals(data)).toBe(true);
    expect(await cat.exited).toEqual({ code: 0, signal: null });
    expect(await cat.closed).toEqual({ code: 0, signal: null });

    // stdin a pipe too; stderr collected and given with the exit
    const echo = await spawnChild('sh', ['-c', 'cat; echo oops >&2; exit 3'], {
      stdio: ['pipe', 'pipe', 'collect'],
    });
    const out = readAll(echo.stdout);
    echo.stdin?.end(data.subarray(0, 100_000));
    expect((await out).equals(data.subarray(0, 100_000))).toBe(true);
    expect(await echo.exited).toEqual({ code: 3, signal: null });
    expect(echo.stderr).toBe('oops\n');
    expect([echo.exitCode, echo.signalCode]).toEqual([3, null]);
  });

  test('no output is lost by a process that writes at once and exits, under concurrency', async () => {
    const runs = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const c = await spawnChild('printf', [`out-${i}`], { stdio: ['ignore', 'pipe', 'ignore'] });
        return (await readAll(c.stdout)).toString();
      }),
    );
    expect(runs).toEqual(Array.from({ length: 60 }, (_, i) => `out-${i}`));
  });

  test('a file slot is the file, read-only; a held slot gets what is written and then its end', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'in');
    await fs.writeFile(file, 'from the file\n');
    const c = await spawnChild(
      'sh',
      ['-c', 'cat; read line <&3; echo "held: $line"; read more <&3 || echo "held ended"'],
      {
        stdio: [{ file }, 'pipe', 'ignore', 'hold'],
      },
    );
    const out = readAll(c.stdout);
    c.write(3, 'one\n');
    c.write(3, '', true);
    expect((await out).toString()).toBe('from the file\nheld: one\nheld ended\n');
    expect((await c.exited).code).toBe(0);
    await expect(
      spawnChild('cat', [], { stdio: [{ file: path.join(dir, 'missing') }, 'pipe', 'ignore'] }),
    ).rejects.toThrow(/ENOENT/);
  });

  test('a socket slot: the process writes to a connection of this process, which is read again afterwards', async () => {
    await withConnection(async (client, conn) => {
      const got: Buffer[] = [];
      client.on('data', (d: Buffer) => got.push(d));
      const c = await spawnChild('sh', ['-c', 'printf "from the process" >&3'], {
        stdio: ['ignore', 'ignore', 'collect', { socket: conn }],
      });
      expect((await c.exited).code).toBe(0);
      conn.resume();
      const back = new Promise<string>((r) => conn.once('data', (d: Buffer) => r(d.toString())));
      client.write('to the server');
      expect(await back).toBe('to the server');
      conn.end('and from the server');
      await new Promise((r) => client.once('end', r));
      expect(Buffer.concat(got).toString()).toBe('from the processand from the server');
    });
  });

  test('not startable: rejects; kill() kills the group; a killed spawner takes its processes with it', async () => {
    await expect(
      spawnChild('/nonexistent/tool', [], { stdio: ['ignore', 'pipe', 'ignore'] }),
    ).rejects.toThrow(/nonexistent/);
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    const group = await spawnChild('sh', ['-c', `sleep 60 & echo $! > '${pidFile}'; wait`], {
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    const helper = Number(await readWhenWritten(pidFile));
    group.kill();
    expect(await group.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await gone(helper)).toBe(true);

    const runningChildren: Child[] = await Promise.all([
      spawnChild('sleep', ['60'], { stdio: ['ignore', 'pipe', 'ignore'] }),
      spawnChild('sleep', ['60'], { detached: false, stdio: ['pipe', 'pipe', 'pipe'] }),
    ]);
    const first = spawnerPid()!;
    process.kill(first, 'SIGKILL');
    for (const c of runningChildren) {
      expect(await c.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(await gone(c.pid)).toBe(true);
    }
    const next = await spawnChild('true', [], { stdio: ['ignore', 'ignore', 'ignore'] });
    expect((await next.exited).code).toBe(0);
    expect(spawnerPid()).not.toBe(first);
  });

  test('a script that spawned processes (a held slot written, a spawn refused for a closed socket) still ends by itself', async () => {
    const spawnerTs = pathToFileURL(path.join(ROOT, 'src/vcs/process/spawner.ts')).href;
    const script = `
      import net from 'node:net';
      import { spawnChild } from '${spawnerTs}';
      const c = await spawnChild('sh', ['-c', 'echo held'], { stdio: ['ignore', 'pipe', 'ignore', 'hold'] });
      const out = [];
      c.stdout.on('data', (d) => out.push(d));
      await c.closed;
      c.write(3, 'done\\n', true); // as a CGI run ends its lifeline, after the exit
      const closed = new net.Socket();
      closed.destroy();
      const refused = await spawnChild('true', [], { stdio: ['ignore', 'ignore', 'ignore', { socket: closed }] }).then(() => 'started', (e) => e.message);
      process.stdout.write(Buffer.concat(out).toString() + refused + '\\n');
    `;
    expect(await runScript(script)).toEqual({
      exit: { code: 0, signal: null },
      out: 'held\nthe socket is closed\n',
    });
  });

  test('a spawn that fails gives back the socket it was given: this process reads it again', async () => {
    await withConnection(async (client, conn) => {
      await expect(
        spawnChild('/nonexistent/tool', [], { stdio: ['ignore', 'ignore', 'ignore', { socket: conn }] }),
      ).rejects.toThrow(/nonexistent/);
      const got = new Promise<string>((r) => conn.once('data', (d: Buffer) => r(d.toString())));
      client.write('still read');
      expect(await got).toBe('still read');
    });
  });

  test('closing with a grace lets a process asked to end finish its work; what outlives the grace is killed', async () => {
    const dir = await tempDir();
    const done = path.join(dir, 'done');
    // a reader that, on its closed input, takes 300 ms to finish and writes a file
    const reader = new PersistentProcess(
      'sh',
      ['-c', `cat >/dev/null; sleep 0.3; echo finished > '${done}'`],
      {},
    );
    const stuck = await spawnChild('sleep', ['60'], { stdio: ['ignore', 'ignore', 'ignore'] });
    reader.close();
    const started = Date.now();
    await closeSpawner(2_000);
    expect(await fs.readFile(done, 'utf8')).toBe('finished\n');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500); // it waited for the stuck one
    expect(await stuck.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await gone(stuck.pid)).toBe(true);
  });
});
