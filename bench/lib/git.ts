/** A git repository with one commit holding `.pipeline.yml`, pushed to Triad (its pipeline 1 is queued). */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 'b',
  GIT_AUTHOR_EMAIL: 'b@b',
  GIT_COMMITTER_NAME: 'b',
  GIT_COMMITTER_EMAIL: 'b@b',
};

/**
 * Commits `pipelineFile` in a new work tree `work` and pushes it to `base/org/repo` as `main` with
 * `token`. Asynchronous on purpose: a server running in this process answers the push.
 */
export async function pushPipeline(o: {
  base: string;
  token: string;
  org: string;
  repo: string;
  work: string;
  pipelineFile: string;
}): Promise<void> {
  const git = (...a: string[]) => run('git', a, { cwd: o.work, env: ENV });
  await fs.mkdir(o.work);
  await git('init', '-q', '-b', 'main');
  await fs.writeFile(path.join(o.work, '.pipeline.yml'), o.pipelineFile);
  await git('add', '.');
  await git('commit', '-q', '-m', 'ci');
  const url = new URL(`${o.base}/${o.org}/${o.repo}`);
  url.username = 'x';
  url.password = o.token;
  await git('push', '-q', url.toString(), 'main');
}
