import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import { startTestServer, uniq, type TestServer } from '../helpers/server.ts';
import { ok, writeFile } from '../helpers/vcs.ts';

// The Mercurial changeset diff is Mercurial's own git-style diff against the first parent:
// renames, copies, binary changes and plain edits read exactly as `hg diff --git -c REV` prints
// them (the reader hands Mercurial the status it computed and skips copy tracing when no file
// is new, so these cases pin that nothing is lost).
const hg = (args: string[], cwd: string) => ok('/usr/bin/hg', args, cwd);

describe('hg changeset diff', () => {
  let s: TestServer;
  let base: string;
  let store: string;
  const revs: Record<string, string> = {};

  beforeAll(async () => {
    s = await startTestServer();
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    const name = uniq('hgdiff');
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'hg' });
    expect(r.status).toBe(201);
    store = s.running.services.repos.path({ id: r.body.data.id, vcs: 'hg' });
    base = `/api/v1/repos/${org}/${name}`;
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const commit = async (key: string, msg: string) => {
      await hg(['commit', '-q', '-u', 'T <t@t>', '-m', msg], store);
      revs[key] = (await hg(['log', '-r', '.', '-T', '{node}'], store)).trim();
    };
    await writeFile(store, 'a.txt', lines);
    await writeFile(store, 'b.txt', 'b\n');
    await writeFile(store, 'bin.dat', Buffer.from([0, 1, 2, 3]));
    await hg(['add', '-q', '.'], store);
    await commit('first', 'first');
    await hg(['mv', 'a.txt', 'renamed.txt'], store);
    await writeFile(store, 'renamed.txt', lines.replace('line 7\n', 'line seven\n'));
    await writeFile(store, 'b.txt', 'b\nb2\n');
    await commit('rename', 'rename and edit');
    await hg(['cp', 'b.txt', 'copy.txt'], store);
    await writeFile(store, 'bin.dat', Buffer.from([0, 1, 2, 4, 0]));
    await commit('copy', 'copy and binary change');
    await writeFile(store, 'b.txt', 'b\nb2\nb3\n');
    await fs.rm(`${store}/copy.txt`);
    await hg(['rm', '-q', '-A', 'copy.txt'], store);
    await commit('edit', 'edit and remove');
    await hg(['update', '-q', 'null'], store);
  });
  afterAll(async () => {
    await s.close();
  });

  test.each(['first', 'rename', 'copy', 'edit'])('%s: the diff is hg diff --git', async (key) => {
    const rev = revs[key]!;
    const r = await s.anon.get(`${base}/changeset/${rev}`);
    expect(r.status).toBe(200);
    expect(r.body.data.diff_truncated).toBe(false);
    expect(r.body.data.diff).toBe(await hg(['diff', '--git', '-c', rev], store));
  });

  test('a rename and a copy are shown as such', async () => {
    const rename = (await s.anon.get(`${base}/changeset/${revs.rename!}`)).body.data.diff as string;
    expect(rename).toContain('rename from a.txt\nrename to renamed.txt');
    expect(rename).toContain('+line seven');
    const copy = (await s.anon.get(`${base}/changeset/${revs.copy!}`)).body.data.diff as string;
    expect(copy).toContain('copy from b.txt\ncopy to copy.txt');
  });
});
