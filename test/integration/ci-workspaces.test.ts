import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { LocalExecutor } from '../../agent/executors/local.ts';
import { runProcess } from '../../agent/executors/process.ts';
import { Sandbox } from '../../agent/executors/sandbox.ts';
import { Workspaces } from '../../agent/executors/workspaces.ts';
import { tempDir } from '../helpers/vcs.ts';

/**
 * The workspaces of the `local` executor with the real sandbox, as root: where they may live,
 * how a tree a step wrote is removed (by the step user, so root never walks it), and which
 * leftovers a sweep removes.
 */

const sandbox = new Sandbox({ network: 'none' });

async function inSandbox(dir: string, script: string): Promise<number> {
  const spec = await sandbox.spec(dir, script, {}, 'none', { cwd: '/workspace' });
  return runProcess(spec, new AbortController().signal, () => undefined);
}

describe('workspaces of an agent running as root', () => {
  test('when the configured directory is writable by others, then the agent refuses it', async () => {
    if (process.getuid?.() !== 0) throw new Error('runs as root');
    const dir = await tempDir('triad-ws-open-');
    await fs.chmod(dir, 0o777);
    const executor = new LocalExecutor({ workDir: dir, sandbox: { network: 'none' } });
    await expect(executor.probe()).rejects.toThrow('is not a root-owned directory that only root may write');
    await fs.chmod(dir, 0o755);
    await expect(new LocalExecutor({ workDir: dir, sandbox: { network: 'none' } }).probe()).resolves.toBe(
      undefined,
    );
  });

  test('when a step left links out of the workspace and unreadable directories, then removal touches nothing outside', async () => {
    const root = await tempDir('triad-ws-root-');
    await fs.chmod(root, 0o755);
    const outside = await tempDir('triad-ws-outside-');
    await fs.writeFile(path.join(outside, 'keep'), 'keep\n');
    await fs.chmod(outside, 0o755);
    const spaces = new Workspaces(sandbox, root);
    const ws = await spaces.create('p1');
    const code = await inSandbox(
      ws,
      [
        'mkdir -p src/a/b && echo x > src/a/b/f',
        `ln -s ${outside} src/out && ln -s ${outside}/keep src/a/keep`,
        'chmod 000 src/a/b src/a',
      ].join(' && '),
    );
    expect(code).toBe(0);
    // the links point at paths the sandbox does not have; on the host they lead out
    expect(await fs.readlink(path.join(ws, 'src', 'out'))).toBe(outside);
    await spaces.remove(ws);
    await expect(fs.access(ws)).rejects.toThrow();
    expect(await fs.readFile(path.join(outside, 'keep'), 'utf8')).toBe('keep\n');
    expect((await fs.stat(outside)).mode & 0o777).toBe(0o755);
  });

  test('when an agent starts, then it removes the workspaces of dead agent processes and leaves a live one alone', async () => {
    const root = await tempDir('triad-ws-sweep-');
    await fs.chmod(root, 0o755);
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    const live = spawn('sleep', ['30']);
    try {
      const names = [`triad-${dead.pid}-abc123-p7-AAAAAA`, `triad-${live.pid}-abc123-p8-BBBBBB`];
      for (const n of names) await fs.mkdir(path.join(root, n, 'src'), { recursive: true });
      await new Workspaces(sandbox, root).sweep(new Set());
      expect((await fs.readdir(root)).sort()).toEqual([names[1]]);
    } finally {
      live.kill('SIGKILL');
    }
  });
});
