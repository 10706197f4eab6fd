import fs from 'node:fs';
import path from 'node:path';
import { GIT } from '../constants.ts';
import {
  blobContent,
  byName,
  pageOf,
  refCommit,
  type RefPage,
  type RefType,
  DEFAULT_LIMITS,
  isoUtc,
  Lru,
  ReadNotFound,
  sortEntries,
  splitMessage,
  type BlobContent,
  type Changeset,
  type ContentLimits,
  type DiffResult,
  type LogEntry,
  type LogPage,
  type RepoReader,
  type TreeEntry,
  readPrefix,
  type RawFile,
  type CompareOptions,
  type Comparison,
} from '../reader.ts';
import { PersistentProcess, Respawning } from '../process/process.ts';
import {
  batchParser,
  isBlobMode,
  isTreeMode,
  parseCommit,
  parseTree,
  type Cmd,
  type Commit,
  type Obj,
  type RawEntry,
} from './objects.ts';
import { output } from '../refs.ts';
import { execute } from '../process/run.ts';
import { cappedDiff, type SizedChange } from '../diff.ts';

/** Branch heads, tags (name -> commit) and tags by commit, as of the ref files' `key`. */
type Refs = {
  key: string;
  head: string;
  branches: Map<string, string>;
  tags: Map<string, string>;
  tagsByCommit: Map<string, string[]>;
};

/** Git: one `git cat-file --batch-command` per repository for every object read. */
export class GitReader implements RepoReader {
  private readonly dir: string;
  private readonly proc: Respawning;
  private readonly commits = new Lru<string, Commit>(50_000);
  private readonly orders = new Lru<string, string[]>(8);
  private readonly ranges = new Lru<string, { mergeBase: string | undefined; ids: string[] }>(16);
  private refsCache: Refs | undefined;

  constructor(dir: string) {
    this.dir = dir;
    this.proc = new Respawning(
      () => new PersistentProcess(GIT.bin, ['-C', dir, 'cat-file', '--batch-command'], { env: GIT.env }),
    );
  }

  busy(): boolean {
    return this.proc.busy();
  }
  close(): void {
    this.proc.close();
  }

  private batch(cmds: Cmd[]): Promise<(Obj | undefined)[]> {
    if (cmds.length === 0) return Promise.resolve([]);
    const text = cmds.map((c) => `${c.op} ${c.name}\n`).join('');
    return this.proc.run((p) => p.request(text, batchParser(cmds)));
  }

  private async one(op: Cmd['op'], name: string): Promise<Obj | undefined> {
    return (await this.batch([{ op, name }]))[0];
  }

  async resolve(rev: string): Promise<string | undefined> {
    if (!/^[A-Za-z0-9_][A-Za-z0-9._/+-]*$/.test(rev) || rev.includes('..') || rev.length > 256) {
      return undefined;
    }
    const obj = await this.one('info', `${rev === 'tip' ? 'HEAD' : rev}^{commit}`);
    return obj?.type === 'commit' ? obj.id : undefined;
  }

  private async mustResolve(rev: string): Promise<string> {
    const id = await this.resolve(rev);
    if (id !== undefined) return id;
    if (rev === 'tip') throw new ReadNotFound('empty');
    throw new ReadNotFound('revision');
  }

  private async commitsOf(ids: string[]): Promise<Commit[]> {
    const missing = ids.filter((id) => this.commits.get(id) === undefined);
    const objs = await this.batch(missing.map((id) => ({ op: 'contents', name: id })));
    objs.forEach((o, i) => {
      const id = missing[i];
      if (o?.data !== undefined && id !== undefined) this.commits.set(id, parseCommit(id, o.data));
    });
    return ids.map((id) => {
      const c = this.commits.get(id);
      if (c === undefined) throw new Error(`git: commit ${id} unreadable`);
      return c;
    });
  }

  /** Branch heads, HEAD's branch and tags by commit; re-read when the ref files change. */
  private async refState(): Promise<Refs> {
    const stamp = ['HEAD', 'packed-refs', 'refs/heads', 'refs/tags']
      .map((f) => {
        try {
          return String(fs.statSync(path.join(this.dir, f)).mtimeMs);
        } catch {
          return '-';
        }
      })
      .join(':');
    if (this.refsCache?.key === stamp) return this.refsCache;
    const stdout = await output(
      GIT.bin,
      [
        '-C',
        this.dir,
        'for-each-ref',
        '--format=%(objectname) %(objecttype) %(*objectname) %(*objecttype) %(refname)',
        'refs/heads',
        'refs/tags',
      ],
      GIT.env,
    );
    const headRef = fs.readFileSync(path.join(this.dir, 'HEAD'), 'utf8').trim();
    const branches = new Map<string, string>();
    const tags = new Map<string, string>();
    const tagsByCommit = new Map<string, string[]>();
    for (const line of stdout.split('\n')) {
      const m = /^([0-9a-f]+) (\w+) ([0-9a-f]*) (\w*) (.+)$/.exec(line);
      if (m === null) continue;
      const [, obj = '', type = '', peeled = '', peeledType = '', ref = ''] = m;
      if (ref.startsWith('refs/heads/')) branches.set(ref.slice(11), obj);
      else if (ref.startsWith('refs/tags/')) {
        // an annotated tag by the object it names; a tag of a tree or a blob names no commit
        const [target, targetType] = peeled !== '' ? [peeled, peeledType] : [obj, type];
        if (targetType !== 'commit') continue;
        tags.set(ref.slice(10), target);
        const list = tagsByCommit.get(target) ?? [];
        list.push(ref.slice(10));
        tagsByCommit.set(target, list);
      }
    }
    const head = headRef.startsWith('ref: refs/heads/') ? headRef.slice(16) : '';
    this.refsCache = { key: stamp, head, branches, tags, tagsByCommit };
    return this.refsCache;
  }

  /** The branch a read names: the rev itself when it is a branch, HEAD's branch for tip. */
  private branchOf(refs: Refs, rev: string, id: string): string {
    if (rev === 'tip') return refs.head;
    if (refs.branches.has(rev)) return rev;
    for (const [name, head] of refs.branches) if (head === id) return name;
    return '';
  }

  private entry(c: Commit, refs: Refs, branch: string): LogEntry {
    return {
      id: c.id,
      short_id: c.id.slice(0, GIT.shortId),
      author: c.author,
      date: isoUtc(c.authorTime),
      ...splitMessage(c.message),
      branch,
      tags: refs.tagsByCommit.get(c.id) ?? [],
    };
  }

  async tree(rev: string, p: string): Promise<TreeEntry[]> {
    const id = await this.mustResolve(rev);
    const obj = await this.one('contents', p === '' ? `${id}^{tree}` : `${id}:${p}`);
    if (obj === undefined) throw new ReadNotFound('path');
    if (obj.type !== 'tree' || obj.data === undefined) throw new ReadNotFound('directory');
    const raw = parseTree(obj.data, id.length / 2);
    const files = raw.filter((e) => isBlobMode(e.mode));
    const infos = await this.batch(files.map((e) => ({ op: 'info', name: e.id })));
    const sizes = new Map(files.map((e, i) => [e.id, infos[i]?.size ?? 0]));
    return sortEntries(
      raw.map((e) => ({ name: e.name, is_dir: isTreeMode(e.mode), size: sizes.get(e.id) ?? 0 })),
    );
  }

  async blob(rev: string, p: string, maxBytes = DEFAULT_LIMITS.blobMaxBytes): Promise<BlobContent> {
    const id = await this.mustResolve(rev);
    if (p === '') throw new ReadNotFound('file');
    const info = await this.one('info', `${id}:${p}`);
    if (info === undefined) throw new ReadNotFound('path');
    if (info.type !== 'blob') throw new ReadNotFound('file');
    if (info.size > maxBytes) {
      // Only the first part is read, by a separate process (the batch process would send it all).
      const head = await readPrefix(
        GIT.bin,
        ['-C', this.dir, 'cat-file', 'blob', info.id],
        maxBytes,
        GIT.env,
      );
      return blobContent(p, head, info.size, maxBytes);
    }
    const obj = await this.one('contents', info.id);
    if (obj?.data === undefined) throw new ReadNotFound('file');
    return blobContent(p, Buffer.from(obj.data), obj.size, maxBytes);
  }

  async file(rev: string, p: string, inline = -1): Promise<RawFile & { size: number }> {
    const id = await this.mustResolve(rev);
    if (p === '') throw new ReadNotFound('file');
    const info = await this.one('info', `${id}:${p}`);
    if (info === undefined) throw new ReadNotFound('path');
    if (info.type !== 'blob') throw new ReadNotFound('file');
    if (info.size > inline) return { commit: id, size: info.size, object: info.id };
    const obj = await this.one('contents', info.id);
    if (obj?.data === undefined) throw new ReadNotFound('file');
    return { commit: id, size: obj.data.length, data: Buffer.from(obj.data), object: info.id };
  }

  /** Ancestors of a commit newest first, in `git log` order (cached per commit: history is immutable). */
  private async order(id: string): Promise<string[]> {
    const hit = this.orders.get(id);
    if (hit !== undefined) return hit;
    // 41 bytes a commit: 256 MiB is some 6.5 million commits
    const stdout = await output(GIT.bin, ['-C', this.dir, 'rev-list', id], GIT.env, 256 * 1024 * 1024);
    const ids = stdout.split('\n').filter((l) => l !== '');
    this.orders.set(id, ids);
    return ids;
  }

  async log(rev: string, page: number, perPage: number): Promise<LogPage> {
    const id = await this.mustResolve(rev);
    const [order, refs] = await Promise.all([this.order(id), this.refState()]);
    const ids = order.slice((page - 1) * perPage, page * perPage);
    const branch = this.branchOf(refs, rev, id);
    const commits = await this.commitsOf(ids);
    return { entries: commits.map((c) => this.entry(c, refs, branch)), total: order.length };
  }

  async refs(
    type: RefType,
    page: number,
    perPage: number,
    defaultBranch: string,
  ): Promise<RefPage | undefined> {
    if (type === 'bookmark') return undefined;
    const refs = await this.refState();
    const all = byName([...(type === 'branch' ? refs.branches : refs.tags)], ([name]) => name);
    const { items, total } = pageOf(all, page, perPage);
    const commits = await this.commitsOf(items.map(([, id]) => id));
    const entries = items.map(([name], i) => ({
      name,
      type,
      default: type === 'branch' && name === defaultBranch,
      commit: refCommit(this.entry(commits[i]!, refs, '')),
    }));
    return { entries, total };
  }

  async changeset(rev: string, limits = DEFAULT_LIMITS): Promise<Changeset> {
    const id = await this.mustResolve(rev);
    const [[c], refs] = await Promise.all([this.commitsOf([id]), this.refState()]);
    if (c === undefined) throw new ReadNotFound('revision');
    const parent = c.parents[0] === undefined ? undefined : (await this.commitsOf([c.parents[0]]))[0];
    const diff = await this.diff(parent?.tree, c.tree, limits);
    return { ...this.entry(c, refs, this.branchOf(refs, rev, id)), ...diff };
  }

  async compare(base: string, head: string, opts: CompareOptions): Promise<Comparison> {
    const hex = /^([0-9a-f]{40}|[0-9a-f]{64})$/;
    if (!hex.test(base) || !hex.test(head)) throw new ReadNotFound('revision');
    const found = await this.batch([base, head].map((id) => ({ op: 'info', name: `${id}^{commit}` })));
    if (found.some((o) => o?.type !== 'commit')) throw new ReadNotFound('revision');
    const [range, refs] = await Promise.all([this.range(base, head), this.refState()]);
    const ids = range.ids.slice((opts.page - 1) * opts.perPage, opts.page * opts.perPage);
    const commits = await this.commitsOf(ids);
    const branch = this.branchOf(refs, head, head);
    let diff: DiffResult | undefined;
    if (opts.limits !== undefined) {
      const ends = await this.commitsOf(range.mergeBase === undefined ? [head] : [range.mergeBase, head]);
      const from = range.mergeBase === undefined ? undefined : ends[0]?.tree;
      diff = await this.diff(from, ends[ends.length - 1]!.tree, opts.limits);
    }
    return {
      mergeBase: range.mergeBase,
      commits: commits.map((c) => this.entry(c, refs, branch)),
      totalCommits: range.ids.length,
      diff,
    };
  }

  /** The merge base of two commits and the commits only `head` reaches, oldest first (kept per pair). */
  private async range(base: string, head: string): Promise<{ mergeBase: string | undefined; ids: string[] }> {
    const key = `${base}...${head}`;
    const hit = this.ranges.get(key);
    if (hit !== undefined) return hit;
    const [mb, list] = await Promise.all([
      // exit 1: no common ancestor
      execute(GIT.bin, ['-C', this.dir, 'merge-base', base, head], { env: GIT.env }),
      output(
        GIT.bin,
        ['-C', this.dir, 'rev-list', '--reverse', head, '--not', base],
        GIT.env,
        256 * 1024 * 1024,
      ),
    ]);
    if (mb.code !== 0 && mb.code !== 1)
      throw new Error(`git merge-base failed (exit ${mb.code}): ${mb.stderr}`);
    const mergeBase = mb.code === 0 ? mb.stdout.toString('utf8').trim() : undefined;
    const out = { mergeBase, ids: list.split('\n').filter((l) => l !== '') };
    this.ranges.set(key, out);
    return out;
  }

  /** Git-style diff between two trees, read through cat-file (no process spawned), capped. */
  private async diff(
    oldTree: string | undefined,
    newTree: string,
    limits: ContentLimits,
  ): Promise<DiffResult> {
    const changes: (SizedChange & { sortKey: string })[] = [];
    const hashLen = newTree.length / 2;
    const readTrees = async (ids: (string | undefined)[]): Promise<RawEntry[][]> => {
      const want = ids.filter((x): x is string => x !== undefined);
      const objs = await this.batch(want.map((x) => ({ op: 'contents', name: x })));
      const byId = new Map(want.map((x, i) => [x, objs[i]?.data]));
      return ids.map((x) => {
        const d = x === undefined ? undefined : byId.get(x);
        return d === undefined ? [] : parseTree(d, hashLen);
      });
    };
    // Breadth-first over differing subtrees, one cat-file round trip per level.
    let level: { prefix: string; a: string | undefined; b: string | undefined }[] = [
      { prefix: '', a: oldTree, b: newTree },
    ];
    while (level.length > 0) {
      const trees = await readTrees(level.flatMap((l) => [l.a, l.b]));
      const nextLevel: typeof level = [];
      level.forEach((l, i) => {
        const a = new Map((trees[2 * i] ?? []).map((e) => [e.name, e]));
        const b = new Map((trees[2 * i + 1] ?? []).map((e) => [e.name, e]));
        for (const name of new Set([...a.keys(), ...b.keys()])) {
          const ea = a.get(name);
          const eb = b.get(name);
          if (ea !== undefined && eb !== undefined && ea.id === eb.id && ea.mode === eb.mode) continue;
          const full = `${l.prefix}${name}`;
          const ta = ea !== undefined && isTreeMode(ea.mode) ? ea.id : undefined;
          const tb = eb !== undefined && isTreeMode(eb.mode) ? eb.id : undefined;
          if (ta !== undefined || tb !== undefined) nextLevel.push({ prefix: `${full}/`, a: ta, b: tb });
          const fa = ea !== undefined && isBlobMode(ea.mode) ? ea : undefined;
          const fb = eb !== undefined && isBlobMode(eb.mode) ? eb : undefined;
          if (fa === undefined && fb === undefined) continue;
          changes.push({
            sortKey: full,
            oldPath: fa === undefined ? undefined : full,
            newPath: fb === undefined ? undefined : full,
            oldMode: fa?.mode,
            newMode: fb?.mode,
            oldId: fa?.id,
            newId: fb?.id,
            oldSize: undefined,
            newSize: undefined,
          });
        }
      });
      level = nextLevel;
    }
    changes.sort((x, y) => (x.sortKey < y.sortKey ? -1 : x.sortKey > y.sortKey ? 1 : 0));
    // Sizes first (one round trip), so contents are read only for files within the caps.
    const blobIds = [
      ...new Set(changes.flatMap((c) => [c.oldId, c.newId]).filter((x): x is string => x !== undefined)),
    ];
    const infos = await this.batch(blobIds.map((x) => ({ op: 'info', name: x })));
    const sizes = new Map(blobIds.map((x, i) => [x, infos[i]?.size ?? 0]));
    for (const c of changes) {
      c.oldSize = c.oldId === undefined ? undefined : sizes.get(c.oldId);
      c.newSize = c.newId === undefined ? undefined : sizes.get(c.newId);
    }
    const load = async (ids: string[]) => {
      const objs = await this.batch(ids.map((x) => ({ op: 'contents', name: x })));
      return new Map(ids.map((x, i) => [x, objs[i]?.data]));
    };
    return cappedDiff(changes, load, limits);
  }
}
