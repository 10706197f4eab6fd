/**
 * Git operations on a bare repository with plumbing only (no working tree, no index):
 * `merge-tree --write-tree` for the dry run and the merge result, `commit-tree` for new commits,
 * `update-ref` with the expected old value for every ref change (a ref that moved meanwhile is
 * never overwritten), `mktag` for annotated tags.
 */
import {
  cleanAuthor,
  defaultMergeMessage,
  InvalidRefName,
  isHexId,
  plausibleRefName,
  RefNotFound,
  type Author,
  type DeleteOutcome,
  type MergeCheck,
  type MergeInput,
  type MergeOutcome,
  type TagInput,
  type TagOutcome,
  type VcsOps,
} from '../ops.ts';
import { GIT } from '../constants.ts';
import { runChecked, runCommand, type RunResult } from '../process/run.ts';

/** `git check-ref-format` rules for one name below `refs/heads/` or `refs/tags/`. */
export function gitRefNameOk(name: string): boolean {
  if (!plausibleRefName(name) || name === '@') return false;
  if (/[\s~^:?*[\\]/.test(name) || name.includes('..') || name.includes('@{') || name.includes('//'))
    return false;
  if (name.startsWith('/') || name.endsWith('/') || name.endsWith('.')) return false;
  return name.split('/').every((c) => c !== '' && !c.startsWith('.') && !c.endsWith('.lock'));
}

type Ref = { id: string; tree: string };

export class GitOps implements VcsOps {
  readonly kind = 'git' as const;
  private readonly timeoutMs: number;

  constructor(opts: { tmpDir: string; timeoutMs: number }) {
    this.timeoutMs = opts.timeoutMs;
  }

  private git(dir: string, args: string[], extra: { input?: string; env?: NodeJS.ProcessEnv } = {}) {
    return runCommand(GIT.bin, ['-C', dir, ...args], {
      env: extra.env ?? GIT.env,
      input: extra.input,
      timeoutMs: this.timeoutMs,
    });
  }

  private async gitOk(dir: string, args: string[], extra: { input?: string; env?: NodeJS.ProcessEnv } = {}) {
    const r = await runChecked(GIT.bin, ['-C', dir, ...args], {
      env: extra.env ?? GIT.env,
      input: extra.input,
      timeoutMs: this.timeoutMs,
    });
    return r.stdout.toString('utf8');
  }

  /** Branch heads (and their trees) of the given names, in one `for-each-ref`; invalid names are absent. */
  private async branches(dir: string, names: string[]): Promise<Map<string, Ref>> {
    const valid = names.filter(gitRefNameOk);
    const found = new Map<string, Ref>();
    if (valid.length === 0) return found;
    const text = await this.gitOk(dir, [
      'for-each-ref',
      '--format=%(refname)%00%(objecttype)%00%(objectname)%00%(tree)',
      ...valid.map((n) => `refs/heads/${n}`),
    ]);
    for (const line of text.split('\n')) {
      const [ref = '', type = '', id = '', tree = ''] = line.split('\0');
      // A pattern also matches refs below it (refs/heads/a matches refs/heads/a/b): keep exact ones.
      if (type === 'commit' && valid.some((n) => ref === `refs/heads/${n}`))
        found.set(ref.slice(11), { id, tree });
    }
    return found;
  }

  async resolveRef(dir: string, name: string): Promise<string | undefined> {
    return (await this.branches(dir, [name])).get(name)?.id;
  }

  async resolveRefs(dir: string, names: readonly string[]): Promise<(string | undefined)[]> {
    const found = await this.branches(dir, [...names]);
    return names.map((n) => found.get(n)?.id);
  }

  /** The commit a tag points to (peeled), undefined when there is no such tag. */
  private async tagCommit(dir: string, name: string): Promise<string | undefined> {
    if (!gitRefNameOk(name)) return undefined;
    const text = await this.gitOk(dir, [
      'for-each-ref',
      '--format=%(refname)%00%(objectname)%00%(*objectname)',
      `refs/tags/${name}`,
    ]);
    for (const line of text.split('\n')) {
      const [ref = '', id = '', peeled = ''] = line.split('\0');
      if (ref === `refs/tags/${name}`) return peeled !== '' ? peeled : id;
    }
    return undefined;
  }

  private async commitById(dir: string, hex: string): Promise<string | undefined> {
    const r = await this.git(dir, ['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
      input: `${hex}^{commit}\n`,
    });
    const [id = '', type = ''] = r.stdout.toString('utf8').trim().split(' ');
    return r.code === 0 && type === 'commit' ? id : undefined;
  }

  async resolveCommit(dir: string, rev: string): Promise<string | undefined> {
    if (/^([0-9a-f]{40}|[0-9a-f]{64})$/i.test(rev)) return this.commitById(dir, rev.toLowerCase());
    return (
      (await this.resolveRef(dir, rev)) ??
      (await this.tagCommit(dir, rev)) ??
      (isHexId(rev) ? await this.commitById(dir, rev.toLowerCase()) : undefined)
    );
  }

  private async heads(dir: string, source: string, target: string): Promise<{ src: Ref; tgt: Ref }> {
    const found = await this.branches(dir, [source, target]);
    const src = found.get(source);
    const tgt = found.get(target);
    if (src === undefined) throw new RefNotFound('source', source);
    if (tgt === undefined) throw new RefNotFound('target', target);
    return { src, tgt };
  }

  /** [behind, ahead]: commits only the target has, commits only the source has. */
  private async counts(dir: string, src: string, tgt: string): Promise<[number, number]> {
    const text = await this.gitOk(dir, ['rev-list', '--left-right', '--count', `${tgt}...${src}`]);
    const [behind = '0', ahead = '0'] = text.trim().split(/\s+/);
    return [Number(behind), Number(ahead)];
  }

  /** Three-way merge of the two commits into a tree (written to the object store, no ref). */
  private async mergeTree(
    dir: string,
    tgt: string,
    src: string,
  ): Promise<{ tree: string; conflicts: string[] }> {
    const r = await this.git(dir, [
      'merge-tree',
      '--write-tree',
      '-z',
      '--name-only',
      '--no-messages',
      '--allow-unrelated-histories',
      tgt,
      src,
    ]);
    if (r.code !== 0 && r.code !== 1)
      throw new Error(`git merge-tree failed (exit ${r.code}): ${r.stderr.trim()}`);
    const [tree = '', ...files] = r.stdout.toString('utf8').split('\0');
    const conflicts = [...new Set(files.filter((f) => f !== ''))].sort();
    return { tree, conflicts: r.code === 1 ? conflicts : [] };
  }

  async checkMerge(dir: string, source: string, target: string): Promise<MergeCheck> {
    const { src, tgt } = await this.heads(dir, source, target);
    const [behind, ahead] = await this.counts(dir, src.id, tgt.id);
    const base = { commitsAhead: ahead, commitsBehind: behind, sourceHead: src.id, targetHead: tgt.id };
    if (ahead === 0) return { state: 'behind', conflictedFiles: [], ...base };
    const merged =
      behind === 0 ? { tree: src.tree, conflicts: [] } : await this.mergeTree(dir, tgt.id, src.id);
    if (merged.conflicts.length > 0) return { state: 'conflict', conflictedFiles: merged.conflicts, ...base };
    return { state: merged.tree === tgt.tree ? 'empty' : 'clean', conflictedFiles: [], ...base };
  }

  private identityEnv(a: Author): NodeJS.ProcessEnv {
    const { name, email } = cleanAuthor(a);
    return {
      ...GIT.env,
      GIT_AUTHOR_NAME: name,
      GIT_AUTHOR_EMAIL: email,
      GIT_COMMITTER_NAME: name,
      GIT_COMMITTER_EMAIL: email,
    };
  }

  private async commitTree(dir: string, tree: string, parents: string[], message: string, author: Author) {
    const args = ['commit-tree', tree, ...parents.flatMap((p) => ['-p', p]), '-F', '-'];
    const text = await this.gitOk(dir, args, {
      input: `${message.trimEnd()}\n`,
      env: this.identityEnv(author),
    });
    return text.trim();
  }

  /** Moves `ref` from `old` to `next`; false when it no longer pointed at `old`. */
  private async updateRef(dir: string, ref: string, next: string, old: string): Promise<boolean> {
    const r = await this.git(dir, ['update-ref', ref, next, old]);
    return r.code === 0;
  }

  async merge(dir: string, input: MergeInput): Promise<MergeOutcome> {
    const { src, tgt } = await this.heads(dir, input.source, input.target);
    if (input.expectedHead !== undefined && input.expectedHead.toLowerCase() !== src.id)
      return { kind: 'head_moved', head: src.id };
    if (input.expectedTargetHead !== undefined && input.expectedTargetHead.toLowerCase() !== tgt.id) {
      return { kind: 'target_moved', head: tgt.id };
    }
    const [behind, ahead] = await this.counts(dir, src.id, tgt.id);
    if (ahead === 0) return { kind: 'nothing_to_merge' };
    const message = input.message?.trim() || defaultMergeMessage(input.source, input.target, input.style);
    let next: string;
    let fastForward = false;
    if (behind === 0 && input.style !== 'squash') {
      next = src.id;
      fastForward = true;
    } else if (input.style === 'ff-only') {
      return { kind: 'not_fast_forward' };
    } else {
      const merged =
        behind === 0 ? { tree: src.tree, conflicts: [] } : await this.mergeTree(dir, tgt.id, src.id);
      if (merged.conflicts.length > 0) return { kind: 'conflict', conflictedFiles: merged.conflicts };
      if (input.style === 'squash') {
        if (merged.tree === tgt.tree) return { kind: 'nothing_to_merge' };
        next = await this.commitTree(dir, merged.tree, [tgt.id], message, input.author);
      } else {
        next = await this.commitTree(dir, merged.tree, [tgt.id, src.id], message, input.author);
      }
    }
    if (!(await this.updateRef(dir, `refs/heads/${input.target}`, next, tgt.id))) {
      return { kind: 'target_moved', head: (await this.resolveRef(dir, input.target)) ?? '' };
    }
    return { kind: 'merged', mergeCommit: next, fastForward };
  }

  async deleteRef(dir: string, name: string, expectedHead?: string): Promise<DeleteOutcome> {
    const head = await this.resolveRef(dir, name);
    if (head === undefined) return 'not_found';
    if (expectedHead !== undefined && expectedHead.toLowerCase() !== head) return 'moved';
    const r = await this.git(dir, ['update-ref', '-d', `refs/heads/${name}`, head]);
    return r.code === 0 ? 'deleted' : 'moved';
  }

  async createTag(dir: string, input: TagInput): Promise<TagOutcome> {
    if (!gitRefNameOk(input.name)) throw new InvalidRefName(`invalid tag name: ${input.name}`);
    const existing = await this.tagCommit(dir, input.name);
    if (existing !== undefined) return { kind: 'tag_exists', commit: existing };
    const commit = await this.resolveCommit(dir, input.target);
    if (commit === undefined) return { kind: 'not_found' };
    let object = commit;
    if (input.message !== undefined && input.message.trim() !== '') {
      const { name, email } = cleanAuthor(input.author);
      const text =
        `object ${commit}\ntype commit\ntag ${input.name}\n` +
        `tagger ${name} <${email}> ${Math.floor(Date.now() / 1000)} +0000\n\n${input.message.trimEnd()}\n`;
      object = (await this.gitOk(dir, ['mktag'], { input: text })).trim();
    }
    // An empty old value: the ref must not exist yet.
    const r: RunResult = await this.git(dir, ['update-ref', `refs/tags/${input.name}`, object, '']);
    if (r.code !== 0) {
      const now = await this.tagCommit(dir, input.name);
      if (now !== undefined) return { kind: 'tag_exists', commit: now };
      // e.g. tag "v1/x" while a tag "v1" exists (a ref cannot be both a file and a directory)
      throw new InvalidRefName(`tag name conflicts with an existing tag: ${input.name}`);
    }
    return { kind: 'created', name: input.name, commit };
  }

  async isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean> {
    if (!isHexId(ancestor) || !isHexId(descendant)) return false;
    const r = await this.git(dir, ['merge-base', '--is-ancestor', ancestor, descendant]);
    return r.code === 0;
  }
}
