/**
 * A throw-away Triad server for the schemathesis run (`bench/fuzz-openapi.sh`): embedded
 * PostgreSQL in a temporary directory (or `DATABASE_URL`), on 127.0.0.1 with any free port,
 * seeded with an organization `fuzz` holding a git repository `git` (commits, a branch
 * `feature/x`, a pipeline file, so pipelines exist), a Mercurial repository `hg` with a commit,
 * an empty Fossil repository `fossil`, issues with labels and a comment, and a CI agent.
 * Writes `{url, token, agentToken}` to the file named by its argument, then runs until SIGTERM or
 * SIGINT and removes its data.
 *
 *   node bench/fuzz-server.ts OUT.json
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiCaller, startBenchServer } from './lib/server.ts';

const out = process.argv[2];
if (out === undefined) throw new Error('usage: node bench/fuzz-server.ts OUT.json');
const server = await startBenchServer('fuzz');
const running = server.running;
const dir = server.dir;
const token = server.token;
const base = running.url;

const call = apiCaller(base, token);

const env = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Fuzz',
  GIT_AUTHOR_EMAIL: 'fuzz@example.test',
  GIT_COMMITTER_NAME: 'Fuzz',
  GIT_COMMITTER_EMAIL: 'fuzz@example.test',
  GIT_CONFIG_GLOBAL: '/dev/null',
  HGUSER: 'Fuzz <fuzz@example.test>',
  HGPLAIN: '1',
  HGRCPATH: '',
};
const run = (cwd: string, cmd: string, ...args: string[]) => promisify(execFile)(cmd, args, { cwd, env });
const cloneUrl = (repo: string) => {
  const u = new URL(`${base}/fuzz/${repo}`);
  u.username = 'x';
  u.password = token;
  return u.toString();
};

await call('POST', '/api/v1/orgs', { name: 'fuzz', description: 'schemathesis fixtures' });
for (const vcs of ['git', 'hg', 'fossil']) await call('POST', '/api/v1/orgs/fuzz/repos', { name: vcs, vcs });

const git = path.join(dir, 'work-git');
await fs.mkdir(git);
await run(git, 'git', 'init', '-q', '-b', 'main');
await fs.writeFile(path.join(git, 'README.md'), '# fuzz\n');
await fs.mkdir(path.join(git, 'src'));
await fs.writeFile(path.join(git, 'src', 'main.c'), 'int main(void) { return 0; }\n');
await fs.writeFile(path.join(git, 'logo.bin'), Buffer.from([0, 1, 2, 255]));
await run(git, 'git', 'add', '.');
await run(git, 'git', 'commit', '-q', '-m', 'first');
await fs.writeFile(
  path.join(git, '.pipeline.yml'),
  'steps:\n  - name: build\n    image: alpine\n    commands: ["echo build"]\n',
);
await run(git, 'git', 'add', '.');
await run(git, 'git', 'commit', '-q', '-m', 'ci');
await run(git, 'git', 'tag', 'v1');
await run(git, 'git', 'checkout', '-q', '-b', 'feature/x');
await fs.writeFile(path.join(git, 'README.md'), '# fuzz\n\non a branch\n');
await run(git, 'git', 'commit', '-q', '-am', 'branch work');
await run(git, 'git', 'push', '-q', cloneUrl('git'), 'main', 'feature/x', 'v1');

const hg = path.join(dir, 'work-hg');
await run(dir, 'hg', 'init', hg);
await fs.writeFile(path.join(hg, 'README'), 'fuzz\n');
await run(hg, 'hg', 'commit', '-q', '-A', '-m', 'first');
await run(hg, 'hg', 'push', '-q', cloneUrl('hg'));

await call('POST', '/api/v1/repos/fuzz/git/labels', { name: 'bug', color: '#ff0000' });
for (const title of ['first issue', 'second issue', 'third issue']) {
  await call('POST', '/api/v1/repos/fuzz/git/issues', { title, labels: ['bug'], severity: 'low' });
}
await call('POST', '/api/v1/repos/fuzz/git/issues/1/comments', { body: 'a comment' });
const agent = await call('POST', '/api/v1/admin/agents', { name: 'fuzz' });

await fs.writeFile(out, JSON.stringify({ url: base, token, agentToken: agent.data.token }));
console.log(`fuzz server on ${base}`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.close();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
