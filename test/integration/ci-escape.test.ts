import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  finishedPipeline,
  pipelineYaml,
  processesWith,
  pushRepo,
  pushWith,
  tempDir,
  userOn,
  zeroConfigAsRoot,
  type Served,
} from '../helpers/serve.ts';
import type { TestUser } from '../helpers/server.ts';
import { ok } from '../helpers/vcs.ts';

/**
 * Escapes from the embedded CI as an outsider would try them: an outsider's push to the
 * zero-configuration server (`triad serve` as root, its embedded agent, the real bubblewrap),
 * checked from outside the sandbox (files a planted library would write, the environment of the
 * launcher, the ownership of probed paths, what the step logs hold).
 */

let s: Served;
let data: string;
let attacker: TestUser;
beforeAll(async () => {
  ({ s, data } = await zeroConfigAsRoot('triad-escape-'));
  attacker = await userOn(s);
}, 120_000);
afterAll(async () => {
  s.child.kill('SIGTERM');
  expect(await s.exited).toBe(0);
}, 60_000);

const run = (repo: { org: string; name: string }) => finishedPipeline(attacker.client, repo);

/** A shared library whose constructor appends a line to `marker` (no headers: any C compiler). */
async function plantedLibrary(dir: string, marker: string): Promise<string> {
  const src = path.join(dir, 'evil.c');
  await fs.writeFile(
    src,
    `int open(const char *, int, ...); long write(int, const void *, unsigned long); int close(int);
__attribute__((constructor)) static void planted(void) {
  int fd = open("${marker}", 02101, 0666); /* O_WRONLY|O_CREAT|O_APPEND */
  if (fd >= 0) { write(fd, "ran\\n", 4); close(fd); }
}
`,
  );
  const lib = path.join(dir, 'evil.so');
  await ok('cc', ['-shared', '-fPIC', '-o', lib, src], dir);
  await fs.chmod(dir, 0o755);
  for (const f of await fs.readdir(dir)) await fs.chmod(path.join(dir, f), 0o755);
  return lib;
}

describe('the embedded CI against an outsider', () => {
  test('when a pipeline sets loader variables to a library on the host, then nothing outside the sandbox loads it or sees them', async () => {
    const dir = await tempDir('triad-planted-');
    const markers = await tempDir('triad-markers-');
    await fs.chmod(markers, 0o777);
    const marker = path.join(markers, 'escaped');
    const lib = await plantedLibrary(dir, marker);
    const tag = `launcher-${randomBytes(4).toString('hex')}`;
    const env = { LD_PRELOAD: lib, LD_AUDIT: lib, LD_LIBRARY_PATH: dir, GCONV_PATH: dir, HOSTILE: tag };
    const extra = `    environment:\n${Object.entries(env)
      .map(([k, v]) => `      ${k}: ${JSON.stringify(v)}\n`)
      .join('')}`;
    const repo = await pushRepo(attacker, {
      '.pipeline.yml': pipelineYaml([
        { name: 'loader', extra, commands: [`echo ${tag} "preload=$LD_PRELOAD"`, 'sleep 4'] },
      ]),
    });
    // while the step runs: the environment of every bwrap process on the host
    const launchers: string[] = [];
    const until = Date.now() + 60_000;
    while (launchers.length === 0 && Date.now() < until) {
      for (const line of await processesWith(tag)) {
        const pid = line.split(':')[0]!;
        const argv0 =
          (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0')[0] ?? '';
        if (path.basename(argv0) !== 'bwrap') continue;
        launchers.push(await fs.readFile(`/proc/${pid}/environ`, 'utf8').catch(() => ''));
      }
      if (launchers.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    const { p, logs } = await run(repo);
    const context = JSON.stringify({ p, logs });
    expect([p.status, context]).toEqual(['success', context]);
    expect(launchers.length).toBeGreaterThan(0);
    for (const e of launchers)
      expect(e.split('\0').filter((v) => /^(LD_|GCONV|HOSTILE)/.test(v))).toEqual([]);
    // the step itself got its variables
    expect(logs[0]).toContain(`${tag} preload=${lib}`);
    // the planted code never ran on the host (inside the sandbox the path does not exist)
    await expect(fs.access(marker)).rejects.toThrow();
    expect(await processesWith(tag)).toEqual([]);
  }, 120_000);

  test('when a pushed tree holds symbolic links to a root-only directory and to the data directory, then both are left untouched', async () => {
    const secretDir = await tempDir('triad-rootonly-');
    await fs.chmod(secretDir, 0o700);
    const secret = `root-only-${randomBytes(8).toString('hex')}`;
    await fs.writeFile(path.join(secretDir, 'secret'), `${secret}\n`, { mode: 0o600 });
    await fs.writeFile(path.join(secretDir, 'suid'), '#!/bin/sh\n', { mode: 0o755 });
    await fs.chmod(path.join(secretDir, 'suid'), 0o4755);
    const watched = [data, ...(await fs.readdir(data)).map((f) => path.join(data, f)), secretDir];
    watched.push(...(await fs.readdir(secretDir)).map((f) => path.join(secretDir, f)));
    const before = await Promise.all(watched.map((f) => fs.lstat(f)));
    const repo = await pushWith(attacker, { vcs: 'git' }, async (work) => {
      await fs.symlink(secretDir, path.join(work, 'to-root-only'));
      await fs.symlink(data, path.join(work, 'to-data'));
      await fs.mkdir(path.join(work, 'deep'));
      await fs.symlink(path.join(secretDir, 'secret'), path.join(work, 'deep', 'secret'));
      await fs.writeFile(
        path.join(work, '.pipeline.yml'),
        pipelineYaml([
          {
            name: 'links',
            commands: [
              'ls -la . to-root-only/ to-data/ 2>&1 || true',
              'cat to-root-only/secret deep/secret 2>&1 || echo SECRET-UNREADABLE',
              'chmod 777 to-root-only to-data 2>&1 || echo CHMOD-REFUSED',
            ],
          },
        ]),
      );
    });
    const { p, logs } = await run(repo);
    expect([p.status, JSON.stringify(logs)]).toEqual(['success', expect.any(String)]);
    expect(logs[0]).toContain('SECRET-UNREADABLE');
    expect(logs[0]).not.toContain(secret);
    const after = await Promise.all(watched.map((f) => fs.lstat(f)));
    const shape = (st: { uid: number; gid: number; mode: number }) => ({
      uid: st.uid,
      gid: st.gid,
      mode: st.mode,
    });
    expect(after.map(shape)).toEqual(before.map(shape));
    expect((after[after.length - 1]!.mode & 0o4000) !== 0 || (after.at(-2)!.mode & 0o4000) !== 0).toBe(true);
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
  }, 120_000);

  test('when a step looks at its mounts, its network and user namespaces, then it finds no path of the server and no way out', async () => {
    const repo = await pushRepo(attacker, {
      '.pipeline.yml': pipelineYaml([
        {
          name: 'look',
          commands: [
            'cat /proc/self/mountinfo',
            'unshare -Ur id 2>&1 || echo NESTED-USERNS-REFUSED',
            `timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/${s.port}' 2>&1 && echo SERVER-REACHED || echo SERVER-UNREACHABLE`,
            `timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/${s.port}' 2>&1 && echo HOST-REACHED || echo HOST-UNREACHABLE`,
            "timeout 5 bash -c 'exec 3<>/dev/tcp/169.254.169.254/80' 2>&1 && echo METADATA-REACHED || echo METADATA-UNREACHABLE",
          ],
        },
      ]),
    });
    const { p, logs } = await run(repo);
    expect([p.status, logs[0]]).toEqual(['success', expect.any(String)]);
    const log = logs[0]!;
    expect(log).toContain('/workspace');
    expect(log).not.toContain(data);
    for (const seen of [
      'NESTED-USERNS-REFUSED',
      'SERVER-UNREACHABLE',
      'HOST-UNREACHABLE',
      'METADATA-UNREACHABLE',
    ]) {
      expect([seen, log.includes(seen)]).toEqual([seen, true]);
    }
    expect(log).not.toMatch(/uid=0\(/);
  }, 120_000);
});
