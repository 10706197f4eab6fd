import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { freshDatabase } from '../helpers/server.ts';
import {
  cli,
  isFinished,
  pipelineYaml,
  processesWith,
  pushRepo,
  randomToken,
  serve,
  tempDir,
  userOn,
  waitPipeline,
  type Proc,
} from '../helpers/serve.ts';

/** The real `triad serve` process with its embedded agent (the zero-configuration set-up). */

const procs: Proc[] = [];
const dirs: string[] = [];
const databases: string[] = [];
afterAll(async () => {
  for (const p of procs)
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
  const base = process.env.TRIAD_TEST_PG;
  if (base !== undefined && databases.length > 0) {
    const c = new pg.Client({ connectionString: `${base}/postgres` });
    await c.connect();
    for (const db of databases) await c.query(`drop database if exists ${db} with (force)`);
    await c.end();
  }
});

async function stop(p: Proc): Promise<number | null> {
  p.child.kill('SIGTERM');
  return p.exited;
}

describe('CI on the zero-configuration server', () => {
  test("when a second user's pipeline goes after the server's secrets, then it reads nothing and only its workspace is writable", async () => {
    const data = await tempDir('triad-zero-');
    dirs.push(data);
    const adminToken = randomToken('adm_');
    // only what `npm start` with an admin token has: embedded PostgreSQL, embedded agent
    const s = await serve({ TRIAD_DATA_DIR: data }, adminToken);
    procs.push(s);
    try {
      const victim = await userOn(s);
      const secretRepo = await pushRepo(victim, { 'secret.txt': 'the other org secret\n' });
      const agentToken = (await fs.readFile(path.join(data, 'embedded-agent.token'), 'utf8')).trim();
      expect(agentToken).toMatch(/^triad_agent_/);
      const other = path.join(data, 'repos', `${secretRepo.id}.git`);
      await fs.access(path.join(other, 'HEAD')); // it exists on the host

      const attacker = await userOn(s);
      const repo = await pushRepo(attacker, {
        '.pipeline.yml': pipelineYaml([
          {
            name: 'attack',
            commands: [
              'echo "uid=$(id -u)"',
              "for f in /proc/[0-9]*/environ; do tr '\\000' '\\n' < $f 2>/dev/null; done; echo ENVIRON-DONE",
              "tr '\\000' '\\n' < /proc/$PPID/environ 2>/dev/null || echo PARENT-ENV-FAILED",
              `cat ${data}/embedded-agent.token || echo TOKEN-READ-FAILED`,
              `ls ${data}/repos || echo REPOS-LIST-FAILED`,
              `cat ${other}/HEAD || echo OTHER-REPO-FAILED`,
              `git clone -q ${other} /tmp/stolen || echo OTHER-CLONE-FAILED`,
              `ls ${data} || echo DATA-LIST-FAILED`,
              `echo x > ${data}/pwned || echo WRITE-DATA-FAILED`,
              'echo x > /usr/pwned || echo WRITE-USR-FAILED',
              'echo x > /etc/pwned || echo WRITE-ETC-FAILED',
              'echo x > /pwned || echo WRITE-ROOT-FAILED',
              'cat /etc/shadow || echo SHADOW-FAILED',
              'env | sort',
              'echo built > artifact.txt && mkdir -p out && echo inner > out/file && echo tmp > /tmp/t',
            ],
          },
          { name: 'later', commands: ['cat artifact.txt out/file', 'test ! -e /tmp/t && echo fresh-tmp'] },
        ]),
      });
      const at = `/api/v1/repos/${repo.org}/${repo.name}/pipelines/1`;
      const p = await waitPipeline(attacker.client, at, isFinished);
      const log1 = (await attacker.client.get(`${at}/steps/1/log`)).text;
      const log2 = (await attacker.client.get(`${at}/steps/2/log`)).text;
      const context = `${JSON.stringify(p)}\n${log1}\n${log2}\n${s.output()}`;
      expect([p.status, context]).toEqual(['success', context]);

      // the secrets are nowhere in what the step could print
      for (const secret of [adminToken, agentToken, 'the other org secret', 'ref: refs/heads']) {
        expect(log1.includes(secret)).toBe(false);
      }
      for (const failed of [
        'ENVIRON-DONE',
        'TOKEN-READ-FAILED',
        'REPOS-LIST-FAILED',
        'OTHER-REPO-FAILED',
        'OTHER-CLONE-FAILED',
        'DATA-LIST-FAILED',
        'WRITE-DATA-FAILED',
        'WRITE-USR-FAILED',
        'WRITE-ETC-FAILED',
        'WRITE-ROOT-FAILED',
        'SHADOW-FAILED',
      ]) {
        expect([failed, log1.includes(failed)]).toEqual([failed, true]);
      }
      expect(log1).not.toMatch(/TRIAD_|DATABASE_URL/);
      expect(log1).toContain(`CI_REPO=${repo.org}/${repo.name}`);
      // not root, when the server runs as root
      if (process.getuid?.() === 0) expect(log1).not.toMatch(/^uid=0$/m);
      await expect(fs.access(path.join(data, 'pwned'))).rejects.toThrow();
      await expect(fs.access('/usr/pwned')).rejects.toThrow();
      // the workspace is usable: a later step sees what an earlier one made; /tmp is per step
      expect(log2).toBe('built\ninner\nfresh-tmp\n');
    } finally {
      expect(await stop(s)).toBe(0);
    }
  }, 120_000);

  test('when the sandbox cannot work here, then the embedded agent stays off and the log says why', async () => {
    const data = await tempDir('triad-nobwrap-');
    dirs.push(data);
    const db = await freshDatabase();
    databases.push(db.split('/').pop()!);
    // a PATH without bwrap
    const s = await serve(
      { TRIAD_DATA_DIR: data, DATABASE_URL: db, TRIAD_EMBEDDED_AGENT: 'local', PATH: '/nonexistent' },
      randomToken('adm_'),
    );
    procs.push(s);
    expect(await stop(s)).toBe(0);
    expect(s.output()).toContain('embedded CI agent not started');
    expect(s.output()).toContain('bubblewrap (bwrap) is not installed');
    await expect(fs.access(path.join(data, 'embedded-agent.token'))).rejects.toThrow();
  }, 60_000);

  test('when steps cannot get their outbound network, then the embedded agent stays off unless TRIAD_CI_NETWORK=none', async () => {
    const data = await tempDir('triad-noslirp-');
    dirs.push(data);
    const db = await freshDatabase();
    databases.push(db.split('/').pop()!);
    // a PATH with the sandbox's tools but without slirp4netns
    const bin = path.join(data, 'bin');
    await fs.mkdir(bin);
    for (const tool of ['bwrap', 'prlimit', 'getent', 'useradd', 'du', 'nice']) {
      const found = ['/usr/bin', '/usr/sbin', '/bin', '/sbin'].map((d) => path.join(d, tool));
      for (const f of found) {
        if (
          await fs.access(f).then(
            () => true,
            () => false,
          )
        ) {
          await fs.symlink(f, path.join(bin, tool));
          break;
        }
      }
    }
    const env = { TRIAD_DATA_DIR: data, DATABASE_URL: db, TRIAD_EMBEDDED_AGENT: 'local', PATH: bin };
    const off = await serve(env, randomToken('adm_'));
    procs.push(off);
    expect(await stop(off)).toBe(0);
    expect(off.output()).toContain('embedded CI agent not started');
    expect(off.output()).toContain('slirp4netns is not installed');
    expect(off.output()).toContain('TRIAD_CI_NETWORK=none');
    const none = await serve({ ...env, TRIAD_CI_NETWORK: 'none' }, randomToken('adm_'), off.port);
    procs.push(none);
    expect(await stop(none)).toBe(0);
    expect(none.output()).toContain('embedded CI agent started (local executor, sandboxed)');
  }, 60_000);

  test('when `triad agent` with the local executor cannot sandbox, then it refuses to start unless opted out', async () => {
    const base = {
      TRIAD_AGENT_SERVER: 'http://127.0.0.1:9',
      TRIAD_AGENT_TOKEN: 'triad_agent_x',
      TRIAD_AGENT_EXECUTOR: 'local',
      TRIAD_AGENT_METRICS_PORT: 'off',
      PATH: '/nonexistent',
    };
    const refused = cli(['agent'], base);
    procs.push(refused);
    expect(await refused.exited).toBe(1);
    expect(refused.output()).toContain('cannot sandbox steps');
    expect(refused.output()).toContain('TRIAD_AGENT_LOCAL_UNSANDBOXED');

    const unsafe = cli(['agent'], { ...base, TRIAD_AGENT_LOCAL_UNSANDBOXED: 'true' });
    procs.push(unsafe);
    const until = Date.now() + 15_000;
    while (!unsafe.output().includes('Triad agent started') && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(unsafe.output()).toContain('WITHOUT a sandbox');
    expect(await stop(unsafe)).toBe(0);
  }, 60_000);
});

describe('a server killed while a pipeline runs', () => {
  test('when it is killed with SIGKILL and restarted, then the pipeline becomes error and no step process is left', async () => {
    const data = await tempDir('triad-kill-');
    dirs.push(data);
    await fs.chmod(data, 0o755); // workspaces under the data directory (the sandbox user can reach it)
    const db = await freshDatabase();
    databases.push(db.split('/').pop()!);
    const work = path.join(data, 'work');
    const env = {
      TRIAD_DATA_DIR: data,
      DATABASE_URL: db,
      TRIAD_EMBEDDED_AGENT: 'local',
      TRIAD_AGENT_WORK_DIR: work,
    };
    const adminToken = randomToken('adm_');
    const marker = `${Date.now() % 100000}.${process.pid}`;
    const first = await serve(env, adminToken);
    procs.push(first);
    const user = await userOn(first);
    const repo = await pushRepo(user, {
      '.pipeline.yml': pipelineYaml([
        { name: 'long', commands: ['echo started', `sleep 7${marker} &`, `sleep 8${marker}`] },
      ]),
    });
    const at = `/api/v1/repos/${repo.org}/${repo.name}/pipelines/1`;
    const running = await waitPipeline(user.client, at, (p) => p.steps?.[0]?.status === 'running');
    expect(running.status).toBe('running');
    // wait for the step's own command (bwrap's command line names it too, before the sandbox is set up)
    const stepRunning = async () => (await processesWith(`8${marker}`)).some((l) => l.includes(': sleep 8'));
    for (let i = 0; i < 200 && !(await stepRunning()); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await stepRunning()).toBe(true);
    const workspaces = async () =>
      (await fs.readdir(work).catch(() => [] as string[])).filter((n) =>
        n.startsWith(`triad-${first.child.pid}-`),
      );
    const before = await workspaces();

    first.child.kill('SIGKILL');
    await first.exited;
    // the sandbox dies with the agent that started it
    let left = await processesWith(marker);
    for (let i = 0; i < 30 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await processesWith(marker);
    }
    expect(left).toEqual([]);

    const second = await serve(env, adminToken, first.port);
    procs.push(second);
    try {
      const p = await waitPipeline(user.client, at, isFinished, 20_000);
      expect(p.status).toBe('error');
      expect(p.error_message).toContain('instance embedded');
      expect(p.error_message).toContain('restarted');
      expect(p.steps[0].status).toBe('failure');
      // the dead process's workspace is swept
      expect(before).toHaveLength(1);
      expect(await workspaces()).toEqual([]);
    } finally {
      expect(await stop(second)).toBe(0);
    }
  }, 120_000);
});
