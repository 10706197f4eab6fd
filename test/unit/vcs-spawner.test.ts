import { afterAll, describe, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { output } from '../../src/vcs/refs.ts';
import { runCommand, VcsCommandFailed, VcsTimeout } from '../../src/vcs/run.ts';
import { closeSpawner, spawnerPid } from '../../src/vcs/spawner.ts';
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
  closeSpawner();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

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
    const run = pathToFileURL(path.join(ROOT, 'src/vcs/run.ts')).href;
    const script = `
      import { runCommand } from '${run}';
      const r = await runCommand('sh', ['-c', 'echo done'], { timeoutMs: 60000 });
      process.stdout.write(r.stdout);
    `;
    const server = spawn(NODE, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    server.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const limit = setTimeout(() => server.kill('SIGKILL'), 30_000);
    try {
      expect(await exited(server)).toEqual({ code: 0, signal: null });
      expect(out).toBe('done\n');
    } finally {
      clearTimeout(limit);
    }
  });

  test('a server process that dies takes its spawner and the commands it runs with it', async () => {
    const dir = await tempDir();
    const pidFile = path.join(dir, 'pid');
    const spawnerFile = path.join(dir, 'spawner');
    const run = pathToFileURL(path.join(ROOT, 'src/vcs/run.ts')).href;
    const spawnerTs = pathToFileURL(path.join(ROOT, 'src/vcs/spawner.ts')).href;
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
