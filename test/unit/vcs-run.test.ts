import { describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  runChecked,
  runCommand,
  VcsCommandFailed,
  VcsTimeout,
  withTempDir,
} from '../../src/vcs/process/run.ts';

/** A process that exists and is not a zombie (an orphan killed here may wait for its reaper). */
const alive = async (pid: number) => {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !/^\d+ \(.*\) Z/.test(stat);
};

describe('runCommand', () => {
  test('answers exit code, stdout and stderr; stdin is the given input', async () => {
    const r = await runCommand('sh', ['-c', 'cat; echo err >&2; exit 3'], { input: 'in', timeoutMs: 10_000 });
    expect(r).toEqual({ code: 3, stdout: Buffer.from('in'), stderr: 'err\n' });
    await expect(runChecked('sh', ['-c', 'exit 2'], { timeoutMs: 10_000 })).rejects.toThrow(VcsCommandFailed);
    await expect(runCommand('/nonexistent/tool', [], { timeoutMs: 10_000 })).rejects.toThrow(
      VcsCommandFailed,
    );
  });

  test('on timeout the whole process group is killed, helpers included', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-run-'));
    try {
      const pidFile = path.join(dir, 'pid');
      // the shell starts a helper in the background and waits: both must die (the helper's
      // sleep is far past this test's time limit, so only the kill ends the command)
      await expect(
        runCommand('sh', ['-c', `sleep 600 & echo $! > '${pidFile}'; wait`], { timeoutMs: 300 }),
      ).rejects.toThrow(VcsTimeout);
      const helper = Number(await fs.readFile(pidFile, 'utf8'));
      for (let i = 0; i < 50 && (await alive(helper)); i++) await new Promise((r) => setTimeout(r, 20));
      expect(await alive(helper)).toBe(false);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  test('too much output kills the command', async () => {
    await expect(runCommand('sh', ['-c', 'yes'], { timeoutMs: 20_000, maxBytes: 1024 })).rejects.toThrow(
      /more than 1024 bytes/,
    );
  });
});

describe('withTempDir', () => {
  test('removes the directory after success and after failure', async () => {
    const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-tmp-'));
    let seen = '';
    await withTempDir(parent, 'x-', async (d) => {
      seen = d;
      await fs.writeFile(path.join(d, 'f'), 'data');
    });
    await expect(
      withTempDir(parent, 'y-', async (d) => {
        await fs.mkdir(path.join(d, 'sub'));
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(seen.startsWith(path.join(parent, 'x-'))).toBe(true);
    expect(await fs.readdir(parent)).toEqual([]);
    await fs.rm(parent, { recursive: true, force: true });
  });
});
