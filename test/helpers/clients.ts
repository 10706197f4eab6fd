import { randomBytes } from 'node:crypto';
import type { VcsKind } from '../../src/vcs/index.ts';
import { ok, sh, tempDir, withCreds, writeFile, type RunResult } from './vcs.ts';

/**
 * A working copy of a hosted repository, driven by the stock client of its kind: commit a file,
 * push. Credentials travel in the URL (git, hg) or with `-B` (fossil), never in a config file.
 */
export class WorkingCopy {
  readonly kind: VcsKind;
  readonly dir: string;
  readonly url: string;
  readonly token: string;

  private constructor(kind: VcsKind, dir: string, url: string, token: string) {
    this.kind = kind;
    this.dir = dir;
    this.url = url;
    this.token = token;
  }

  static async clone(kind: VcsKind, url: string, token: string): Promise<WorkingCopy> {
    const parent = await tempDir();
    const dir = `${parent}/w`;
    switch (kind) {
      case 'git':
        await ok('git', ['clone', '-q', withCreds(url, token), dir], parent);
        await ok('git', ['checkout', '-q', '-B', 'main'], dir);
        break;
      case 'hg':
        await ok('hg', ['clone', '-q', withCreds(url, token), dir], parent);
        break;
      case 'fossil':
        await ok('fossil', ['clone', '-B', `x:${token}`, url, `${parent}/repo.fossil`], parent);
        await ok('fossil', ['open', '-f', '--workdir', dir, `${parent}/repo.fossil`], parent);
        await ok('fossil', ['settings', 'autosync', 'off'], dir);
        break;
    }
    return new WorkingCopy(kind, dir, url, token);
  }

  /** Commits `file` with `content` (random bytes when a number is given). */
  async commit(file: string, content: string | number, message: string): Promise<void> {
    await writeFile(this.dir, file, typeof content === 'number' ? randomBytes(content) : content);
    switch (this.kind) {
      case 'git':
        await ok('git', ['add', '-A'], this.dir);
        await ok('git', ['commit', '-q', '-m', message], this.dir);
        return;
      case 'hg':
        await ok('hg', ['commit', '-q', '-A', '-m', message], this.dir);
        return;
      case 'fossil':
        await ok('fossil', ['addremove', '--dotfiles'], this.dir);
        await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', message], this.dir);
    }
  }

  /** The command line that pushes this working copy's default line. */
  pushCommand(): [string, string[]] {
    switch (this.kind) {
      case 'git':
        return ['git', ['push', '-q', withCreds(this.url, this.token), 'main']];
      case 'hg':
        return ['hg', ['push', '-q', withCreds(this.url, this.token)]];
      case 'fossil':
        return ['fossil', ['push', '-B', `x:${this.token}`, this.url]];
    }
  }

  push(): Promise<RunResult> {
    const [cmd, args] = this.pushCommand();
    return sh(cmd, args, this.dir);
  }

  /** The id of the working copy's current commit. */
  async head(): Promise<string> {
    switch (this.kind) {
      case 'git':
        return (await ok('git', ['rev-parse', 'HEAD'], this.dir)).trim();
      case 'hg':
        return (await ok('hg', ['log', '-r', '.', '-T', '{node}'], this.dir)).trim();
      case 'fossil': {
        const info = await ok('fossil', ['info'], this.dir);
        const m = /checkout:\s+([0-9a-f]+)/.exec(info);
        if (m?.[1] === undefined) throw new Error(`fossil info: no checkout in ${info}`);
        return m[1];
      }
    }
  }
}
