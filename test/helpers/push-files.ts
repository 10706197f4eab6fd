/**
 * One commit of the given files pushed to a repository of any kind with its own client (git, hg,
 * fossil), on the kind's default line (`main`, `default`, `trunk`); dot directories included.
 */
import type { VcsKind } from '../../src/vcs/index.ts';
import { ok, tempDir, withCreds, writeFile } from './vcs.ts';

export async function pushFiles(
  vcs: VcsKind,
  clone: string,
  token: string,
  files: Record<string, string>,
): Promise<void> {
  const work = await tempDir(`triad-files-${vcs}-`);
  const write = async () => {
    for (const [rel, content] of Object.entries(files)) await writeFile(work, rel, content);
  };
  if (vcs === 'git') {
    await ok('git', ['init', '-q', '-b', 'main', '.'], work);
    await write();
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'files'], work);
    await ok('git', ['push', '-q', withCreds(clone, token), 'main'], work);
    return;
  }
  if (vcs === 'hg') {
    await ok('hg', ['init', '.'], work);
    await write();
    await ok('hg', ['add', '-q'], work);
    await ok('hg', ['commit', '-m', 'files'], work);
    await ok('hg', ['push', '-q', withCreds(clone, token)], work);
    return;
  }
  const store = await tempDir('triad-files-fossil-store-');
  await ok('fossil', ['clone', '-B', `x:${token}`, clone, `${store}/repo.fossil`], store);
  await ok('fossil', ['open', '-f', '--workdir', work, `${store}/repo.fossil`], store);
  await ok('fossil', ['settings', 'autosync', 'off'], work);
  await write();
  await ok('fossil', ['addremove', '--dotfiles'], work);
  await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', 'files'], work);
  await ok('fossil', ['push', '-B', `x:${token}`, clone], work);
}
