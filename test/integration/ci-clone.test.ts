import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  finishedPipeline,
  pipelineYaml,
  pushWith,
  tempDir,
  userOn,
  zeroConfigAsRoot,
  type Pushed,
  type Served,
} from '../helpers/serve.ts';
import type { TestUser } from '../helpers/server.ts';
import { ok, withCreds } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/**
 * The clone of the embedded CI (`triad serve` as root, the real bubblewrap): an outsider's
 * repository names another organization's private repositories as Mercurial subrepositories and
 * Git submodules, by the host path of their store and by URL, with their real commit ids; the
 * clone fetches none of them and leaves no credential in the workspace.
 */

let s: Served;
let data: string;
let attacker: TestUser;
let victim: TestUser;
const secret = `victim-secret-${randomBytes(8).toString('hex')}`;
const victims: Partial<Record<VcsKind, Pushed>> = {};
beforeAll(async () => {
  ({ s, data } = await zeroConfigAsRoot('triad-clone-'));
  victim = await userOn(s);
  attacker = await userOn(s);
  const org = `victim${randomBytes(3).toString('hex')}`;
  expect((await victim.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
  for (const vcs of ['git', 'hg'] as const) {
    victims[vcs] = await pushWith(victim, { vcs, private: true, org }, (w) =>
      fs.writeFile(path.join(w, 'secret.txt'), `${secret}\n`),
    );
  }
}, 120_000);
afterAll(async () => {
  s.child.kill('SIGTERM');
  expect(await s.exited).toBe(0);
}, 60_000);

async function run(repo: { org: string; name: string }): Promise<{ p: any; log: string }> {
  const { p, logs } = await finishedPipeline(attacker.client, repo);
  return { p, log: logs[0] ?? '' };
}

const store = (r: Pushed, vcs: VcsKind) => path.join(data, 'repos', `${r.id}.${vcs}`);
const urlOf = (r: Pushed) => `${s.url}/${r.org}/${r.name}`;

/** Makes hg push without pushing subrepositories first (they are another owner's). */
async function noSubrepos(): Promise<string[]> {
  const dir = await tempDir('triad-hgext-');
  const ext = path.join(dir, 'plain.py');
  await fs.writeFile(
    ext,
    "from mercurial import extensions, subrepoutil\ndef uisetup(ui):\n    extensions.wrapfunction(subrepoutil, 'state', lambda orig, ctx, ui: {})\n",
  );
  return ['--config', `extensions.plain=${ext}`];
}

const look = (paths: string[], fetch: string) =>
  pipelineYaml([
    {
      name: 'look',
      commands: [
        ...paths.map((p) => `ls -la ${p} 2>&1 || echo ${p}-ABSENT`),
        `cat ${paths.map((p) => `${p}/secret.txt`).join(' ')} 2>&1 || true`,
        `${fetch} 2>&1 | tail -5 || true`,
        `cat ${paths.map((p) => `${p}/secret.txt`).join(' ')} 2>&1 || true`,
        'echo LOOKED',
      ],
    },
  ]);

describe('the CI clone', () => {
  test("when .hgsub names another organization's private repository by store path and by URL, then nothing of it is fetched", async () => {
    const target = victims.hg!;
    const repo = await pushWith(attacker, { vcs: 'hg', hgPushConfig: await noSubrepos() }, async (w) => {
      // the commit records the victim's changeset as both subrepositories' state
      for (const sub of ['bypath', 'byurl']) {
        await ok('hg', ['clone', '-q', withCreds(urlOf(target), victim.token), path.join(w, sub)], w);
      }
      await fs.writeFile(
        path.join(w, '.hgsub'),
        `bypath = ${store(target, 'hg')}\nbyurl = ${urlOf(target)}\n`,
      );
      // a step that then asks Mercurial to fetch them itself reaches neither
      await fs.writeFile(path.join(w, '.pipeline.yml'), look(['bypath', 'byurl'], 'hg update -C -r .'));
    });
    const { p, log } = await run(repo);
    expect([p.status, log]).toEqual(['success', expect.stringContaining('LOOKED')]);
    expect(log).toContain('bypath-ABSENT');
    expect(log).toContain('byurl-ABSENT');
    expect(log).not.toContain(secret);
  }, 120_000);

  test("when .gitmodules names another organization's private repository by store path and by URL, then nothing of it is fetched", async () => {
    const target = victims.git!;
    const repo = await pushWith(attacker, { vcs: 'git' }, async (w) => {
      await fs.writeFile(
        path.join(w, '.gitmodules'),
        `[submodule "bypath"]\n\tpath = bypath\n\turl = ${store(target, 'git')}\n[submodule "byurl"]\n\tpath = byurl\n\turl = ${urlOf(target)}\n`,
      );
      await ok('git', ['update-index', '--add', '--cacheinfo', `160000,${target.head},bypath`], w);
      await ok('git', ['update-index', '--add', '--cacheinfo', `160000,${target.head},byurl`], w);
      await fs.writeFile(
        path.join(w, '.pipeline.yml'),
        look(['bypath', 'byurl'], 'git submodule update --init'),
      );
    });
    const { p, log } = await run(repo);
    expect([p.status, log]).toEqual(['success', expect.stringContaining('LOOKED')]);
    expect(log).not.toContain(secret);
  }, 120_000);

  test.each(['git', 'hg', 'fossil'] as const)(
    'when a private %s repository is cloned, then no credential is left in the workspace',
    async (vcs) => {
      const checks: Record<VcsKind, string> = {
        git: 'cat .git/config',
        hg: 'cat .hg/hgrc',
        // the saved credential's row, and any trace of it in the file's freed pages
        fossil: `fossil sql -R ../src.fossil "select count(*) from config where name glob 'http-auth:*' or name = 'last-sync-pw'"; grep -ac 'http-auth' ../src.fossil || true`,
      };
      const repo = await pushWith(attacker, { vcs, private: true }, (w) =>
        fs.writeFile(
          path.join(w, '.pipeline.yml'),
          pipelineYaml([
            {
              name: 'creds',
              commands: [
                checks[vcs],
                "grep -raoE 'triad_[0-9a-f]{48}' /workspace | head -3; echo SCANNED",
                'ls /workspace',
              ],
            },
          ]),
        ),
      );
      const { p, log } = await run(repo);
      expect([p.status, log]).toEqual(['success', expect.stringContaining('SCANNED')]);
      expect(log).not.toMatch(/triad_[0-9a-f]{48}/);
      expect(log).not.toMatch(/:\/\/[^/\s]*:[^/\s]*@/); // no URL with a password
      if (vcs === 'fossil') expect(log.split('\n').slice(0, 2)).toEqual(['0', '0']);
    },
    120_000,
  );
});
