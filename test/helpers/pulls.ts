import type { VcsKind } from '../../src/vcs/index.ts';
import { WorkingCopy } from './clients.ts';
import type { Client, TestUser } from './server.ts';
import { uniq } from './server.ts';
import { ok, sh, withCreds, writeFile } from './vcs.ts';

/** The mainline a pull request targets by default: git main, Mercurial `@`, Fossil trunk. */
export const MAINLINE: Record<VcsKind, string> = { git: 'main', hg: '@', fossil: 'trunk' };

/**
 * A hosted repository of one kind with a working copy driven by the stock client: commits on the
 * mainline or on a branch (git, Fossil) / bookmark (Mercurial), pushed over HTTP.
 */
export class PrRepo {
  readonly kind: VcsKind;
  readonly org: string;
  readonly name: string;
  readonly id: number;
  readonly w: WorkingCopy;
  readonly api: string;

  private constructor(kind: VcsKind, org: string, name: string, id: number, w: WorkingCopy) {
    this.kind = kind;
    this.org = org;
    this.name = name;
    this.id = id;
    this.w = w;
    this.api = `/api/v1/repos/${org}/${name}`;
  }

  /** A new repository with one commit (`README`) on its mainline (`empty`: none, a fresh clone). */
  static async create(
    owner: TestUser,
    org: string,
    kind: VcsKind,
    opts: { isPrivate?: boolean; empty?: boolean } = {},
  ): Promise<PrRepo> {
    const name = uniq(kind);
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, {
      name,
      vcs: kind,
      is_private: opts.isPrivate ?? false,
    });
    if (r.status !== 201) throw new Error(`create repo: ${r.status} ${r.text}`);
    const w = await WorkingCopy.clone(kind, r.body.data.clone_url, owner.token);
    const repo = new PrRepo(kind, org, name, r.body.data.id, w);
    if (opts.empty !== true) await repo.commitOn(MAINLINE[kind], { README: 'hello\n' }, 'first');
    return repo;
  }

  /**
   * A commit on `ref` (created from `from`, default the mainline, when it does not exist yet),
   * pushed. Files with null content are deleted.
   */
  async commitOn(
    ref: string,
    files: Record<string, string | null>,
    message: string,
    from?: string,
  ): Promise<void> {
    const d = this.w.dir;
    const write = async () => {
      for (const [f, c] of Object.entries(files)) {
        if (c === null) await sh('rm', ['-f', f], d);
        else await writeFile(d, f, c);
      }
    };
    const url = withCreds(this.w.url, this.w.token);
    switch (this.kind) {
      case 'git': {
        await this.pull();
        const exists =
          (await sh('git', ['rev-parse', '-q', '--verify', `refs/remotes/origin/${ref}`], d)).code === 0;
        const base = exists ? `origin/${ref}` : `origin/${from ?? 'main'}`;
        const hasBase = (await sh('git', ['rev-parse', '-q', '--verify', base], d)).code === 0;
        await ok('git', ['checkout', '-q', '-B', ref, ...(hasBase ? [base] : [])], d);
        await write();
        await ok('git', ['add', '-A'], d);
        await ok('git', ['commit', '-q', '-m', message], d);
        await ok('git', ['push', '-q', url, `${ref}:refs/heads/${ref}`], d);
        return;
      }
      case 'hg': {
        await this.pull();
        const marks = await ok('hg', ['bookmarks', '-T', '{bookmark}\n'], d);
        const has = (b: string) => marks.split('\n').includes(b);
        if (has(ref)) await ok('hg', ['update', '-q', '-r', ref], d);
        else if (has(from ?? '@')) {
          await ok('hg', ['update', '-q', '-r', from ?? '@'], d);
          // committing must not move the bookmark updated to (a push would export it)
          await ok('hg', ['bookmarks', '--inactive'], d);
        }
        await write();
        await ok('hg', ['commit', '-q', '-A', '-m', message], d);
        await ok('hg', ['bookmark', '-f', ref], d);
        await ok('hg', ['push', '-q', '-f', '-B', ref, url], d);
        return;
      }
      case 'fossil': {
        await this.pull();
        const branches = await ok('fossil', ['branch', 'list'], d);
        const exists = branches.split('\n').some((l) => l.replace(/^[\s*]+/, '').trim() === ref);
        await ok('fossil', ['update', exists ? ref : (from ?? 'trunk')], d);
        await write();
        await ok('fossil', ['addremove', '--dotfiles'], d);
        await ok(
          'fossil',
          ['commit', '--user', 'ada', '--no-warnings', '-m', message, ...(exists ? [] : ['--branch', ref])],
          d,
        );
        await ok('fossil', ['push', '-B', `x:${this.w.token}`, this.w.url], d);
        return;
      }
    }
  }

  /** Fetches what the server has (merges made by the server included). */
  async pull(): Promise<void> {
    const d = this.w.dir;
    const url = withCreds(this.w.url, this.w.token);
    switch (this.kind) {
      case 'git':
        await ok('git', ['fetch', '-q', '--prune', url, '+refs/heads/*:refs/remotes/origin/*'], d);
        return;
      case 'hg': {
        const r = await sh('hg', ['pull', '-q', url], d);
        if (r.code > 1) throw new Error(`hg pull: ${r.stderr}`);
        return;
      }
      case 'fossil':
        await ok('fossil', ['pull', '-B', `x:${this.w.token}`, this.w.url], d);
    }
  }

  /**
   * The branches (git, open Fossil branches) or bookmarks (Mercurial) the server has, as the stock
   * client lists them from it.
   */
  async heads(): Promise<string[]> {
    const d = this.w.dir;
    const url = withCreds(this.w.url, this.w.token);
    const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
    switch (this.kind) {
      case 'git':
        return lines(await ok('git', ['ls-remote', '--heads', url], d)).map((l) =>
          l.split('\t')[1]!.replace(/^refs\/heads\//, ''),
        );
      case 'hg':
        // the server's bookmarks themselves (a pull never deletes a local bookmark)
        return lines(await ok('hg', ['debugpushkey', url, 'bookmarks'], d)).map((l) => l.split('\t')[0]!);
      case 'fossil':
        await this.pull();
        return lines(await ok('fossil', ['branch', 'list'], d)).map((l) => l.replace(/^[\s*]+/, '').trim());
    }
  }

  /** The parents of a commit as the stock client sees them after `pull` (merge links included). */
  async parents(rev: string): Promise<number> {
    await this.pull();
    const d = this.w.dir;
    switch (this.kind) {
      case 'git':
        return (await ok('git', ['rev-list', '--parents', '-n', '1', rev], d)).trim().split(' ').length - 1;
      case 'hg':
        return (await ok('hg', ['log', '-r', rev, '-T', '{parents}'], d)).trim().split(/\s+/).filter(Boolean)
          .length;
      case 'fossil': {
        const sql = `SELECT count(*) FROM plink WHERE cid = (SELECT rid FROM blob WHERE uuid = '${rev}');`;
        return Number((await ok('fossil', ['sql', sql], d)).trim());
      }
    }
  }

  /** A file at a ref as the contents API serves it (undefined when absent). */
  async fileAt(c: Client, ref: string, file: string): Promise<string | undefined> {
    const r = await c.get(`${this.api}/blob/${file}?rev=${encodeURIComponent(ref)}`);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`blob: ${r.status} ${r.text}`);
    return r.body.data.content as string;
  }
}

/** Reads a pull request until its mergeability is computed (a loaded machine may exceed the budget). */
export async function settled(c: Client, path: string): Promise<any> {
  for (let i = 0; i < 600; i += 1) {
    const r = await c.get(path);
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.text}`);
    if (r.body.data.mergeable_state !== 'checking') return r.body.data;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${path}: still checking after a minute`);
}
