import fs from 'node:fs';
import path from 'node:path';
import {
  blobContent,
  isoUtc,
  Lru,
  PersistentProcess,
  ReadNotFound,
  Respawning,
  sortEntries,
  splitMessage,
  type BlobContent,
  type Changeset,
  type LogEntry,
  type LogPage,
  type Parser,
  type RepoReader,
  type TreeEntry,
} from './reader.ts';

export const HG_BIN = '/usr/bin/hg';
export const HG_SHORT = 12;
const NULL_NODE = '0'.repeat(40);
const WDIR_NODE = 'f'.repeat(40);
const ENV = { ...process.env, HGPLAIN: '1', HGENCODING: 'UTF-8', HGRCPATH: '', LANG: 'C.UTF-8' };

type Result = { code: number; out: Buffer; err: string };

/** Reads command-server frames (channel byte, 4-byte big-endian length, data) up to the 'r' frame. */
function resultParser(): Parser<Result> {
  return (buf) => {
    const out: Buffer[] = [];
    let err = '';
    let at = 0;
    for (;;) {
      if (buf.length < at + 5) return undefined;
      const ch = String.fromCharCode(buf[at] ?? 0);
      const len = buf.readUInt32BE(at + 1);
      if (ch === 'I' || ch === 'L') throw new Error('hg command server asked for input');
      if (buf.length < at + 5 + len) return undefined;
      const data = buf.subarray(at + 5, at + 5 + len);
      at += 5 + len;
      if (ch === 'o') out.push(data);
      else if (ch === 'e') err += data.toString('utf8');
      else if (ch === 'r')
        return { value: { code: data.readInt32BE(0), out: Buffer.concat(out), err }, used: at };
      else if (ch !== 'd' && ch.toUpperCase() === ch) throw new Error(`hg command server: channel ${ch}`);
    }
  };
}

/** The hello frame the server writes first. */
const helloParser: Parser<string> = (buf) => {
  if (buf.length < 5) return undefined;
  const len = buf.readUInt32BE(1);
  if (buf.length < 5 + len) return undefined;
  return { value: buf.toString('utf8', 5, 5 + len), used: 5 + len };
};

/** A revset string literal: evaluated as one symbol (hash, prefix, tag, bookmark, branch, tip). */
function lit(rev: string): string {
  return `'${rev.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

type HgJson = {
  node: string;
  branch: string;
  date: [number, number];
  desc: string;
  tags: string[];
  user: string;
  diff?: string;
};

/**
 * Mercurial: one `hg serve --cmdserver pipe` per repository. The command server reloads the
 * repository when it changed on disk before each command, so pushes are seen without a restart.
 */
export class HgReader implements RepoReader {
  private readonly proc: Respawning;
  private readonly totals = new Lru<string, number>(256);
  private readonly dir: string;
  /** rev text -> node, valid while the repository's stamp is unchanged. */
  private resolved = new Map<string, string | null>();
  private stamp = '';

  constructor(dir: string) {
    this.dir = dir;
    this.proc = new Respawning(() => {
      const p = new PersistentProcess(HG_BIN, ['serve', '--cmdserver', 'pipe', '-R', dir], {
        env: ENV,
        cwd: dir,
      });
      p.request('', helloParser).catch(() => undefined);
      return p;
    });
  }

  busy(): boolean {
    return this.proc.busy();
  }
  close(): void {
    this.proc.close();
  }

  private frame(args: string[]): Buffer {
    const body = Buffer.from(args.join('\0'), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length);
    return Buffer.concat([Buffer.from('runcommand\n'), head, body]);
  }

  /** Runs commands back to back on the server (one write, answers in order). */
  private run(...cmds: string[][]): Promise<Result[]> {
    return this.proc.run(async (p) => {
      const frames = Buffer.concat(cmds.map((c) => this.frame(c)));
      const parsers = cmds.map(() => resultParser());
      const all: Parser<Result[]> = (buf) => {
        const results: Result[] = [];
        let at = 0;
        for (const parse of parsers) {
          const r = parse(buf.subarray(at));
          if (r === undefined) return undefined;
          results.push(r.value);
          at += r.used;
        }
        return { value: results, used: at };
      };
      return p.request(frames, all);
    });
  }

  /** Maps a failed command to 404 (unknown revision) or rethrows. */
  private async failed(r: Result, rev: string): Promise<never> {
    if (
      /unknown revision|ambiguous identifier|filtered revision|empty string is not|parse error/i.test(r.err)
    ) {
      throw new ReadNotFound('revision');
    }
    if (rev === 'tip' && (await this.resolve('tip')) === undefined) throw new ReadNotFound('empty');
    throw new Error(`hg failed (${r.code}): ${r.err.trim()}`);
  }

  /** Changes whenever a commit, bookmark move, local tag or obsolescence marker could change names. */
  private currentStamp(): string {
    return [
      '.hg/store/00changelog.i',
      '.hg/bookmarks',
      '.hg/store/obsstore',
      '.hg/localtags',
      '.hg/store/phaseroots',
    ]
      .map((f) => {
        try {
          const st = fs.statSync(path.join(this.dir, f));
          return `${st.size}@${st.mtimeMs}`;
        } catch {
          return '-';
        }
      })
      .join(':');
  }

  async resolve(rev: string): Promise<string | undefined> {
    const stamp = this.currentStamp();
    if (stamp !== this.stamp || this.resolved.size > 1000) {
      this.stamp = stamp;
      this.resolved = new Map();
    }
    const hit = this.resolved.get(rev);
    if (hit !== undefined) return hit ?? undefined;
    const node = await this.lookup(rev);
    if (this.stamp === stamp) this.resolved.set(rev, node ?? null);
    return node;
  }

  private async lookup(rev: string): Promise<string | undefined> {
    const [r] = await this.run(['log', '-r', lit(rev), '-T', '{node}\\n']);
    if (r === undefined || r.code !== 0) return undefined;
    const node = r.out.toString('utf8').trim();
    // The null revision and the virtual working-directory revision (ff...ff) name no changeset.
    return /^[0-9a-f]{40}$/.test(node) && node !== NULL_NODE && node !== WDIR_NODE ? node : undefined;
  }

  private async mustResolve(rev: string): Promise<string> {
    const node = await this.resolve(rev);
    if (node !== undefined) return node;
    throw new ReadNotFound(rev === 'tip' ? 'empty' : 'revision');
  }

  async tree(rev: string, p: string): Promise<TreeEntry[]> {
    const node = await this.mustResolve(rev);
    const prefix = p === '' ? '' : `${p}/`;
    const [all, direct] = await this.run(
      ['files', '-r', node, '-T', '{path}\\0', p === '' ? 'path:.' : `path:${p}`],
      ['files', '-r', node, '-T', '{path}\\0{size}\\0', p === '' ? 'rootfilesin:.' : `rootfilesin:${p}`],
    );
    if (all === undefined || direct === undefined) throw new Error('hg: no answer');
    if (all.code !== 0 && all.code !== 1) return this.failed(all, rev);
    const paths = all.out
      .toString('utf8')
      .split('\0')
      .filter((x) => x !== '');
    if (paths.length === 0 || (p !== '' && paths.includes(p)))
      throw new ReadNotFound(p === '' ? 'empty' : 'directory');
    const dirs = new Set<string>();
    for (const f of paths) {
      const rest = f.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (slash >= 0) dirs.add(rest.slice(0, slash));
    }
    const parts = direct.out.toString('utf8').split('\0');
    const entries: TreeEntry[] = [...dirs].map((name) => ({ name, is_dir: true, size: 0 }));
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const f = parts[i] ?? '';
      entries.push({ name: f.slice(prefix.length), is_dir: false, size: Number(parts[i + 1]) });
    }
    return sortEntries(entries);
  }

  async blob(rev: string, p: string): Promise<BlobContent> {
    const node = await this.mustResolve(rev);
    if (p === '') throw new ReadNotFound('file');
    const slash = p.lastIndexOf('/');
    const parent = slash < 0 ? '.' : p.slice(0, slash);
    // Only the direct files of the parent directory, intersected with the path: the file or nothing.
    const [r] = await this.run([
      'cat',
      '-r',
      node,
      '-T',
      '{path}\\0{data}',
      '-I',
      `path:${p}`,
      `rootfilesin:${parent}`,
    ]);
    if (r === undefined) throw new Error('hg: no answer');
    if (r.code !== 0) {
      if (r.code === 1) throw new ReadNotFound('path');
      return this.failed(r, rev);
    }
    const nul = r.out.indexOf(0);
    if (nul < 0 || r.out.toString('utf8', 0, nul) !== p) throw new ReadNotFound('file');
    return blobContent(p, Buffer.from(r.out.subarray(nul + 1)));
  }

  private entry(j: HgJson): LogEntry {
    return {
      id: j.node,
      short_id: j.node.slice(0, HG_SHORT),
      author: j.user,
      date: isoUtc(j.date[0] * 1000),
      ...splitMessage(j.desc),
      branch: j.branch,
      tags: j.tags.filter((t) => t !== 'tip'),
    };
  }

  private parseJson(r: Result): HgJson[] {
    return JSON.parse(r.out.toString('utf8')) as HgJson[];
  }

  async log(rev: string, page: number, perPage: number): Promise<LogPage> {
    const node = await this.mustResolve(rev);
    const offset = (page - 1) * perPage;
    const cached = this.totals.get(node);
    const cmds = [['log', '-r', `limit(reverse(::${node}), ${perPage}, ${offset})`, '-T', 'json']];
    if (cached === undefined) cmds.push(['log', '-r', node, '-T', `{revset('::%d', rev)|count}`]);
    const [pageR, totalR] = await this.run(...cmds);
    if (pageR === undefined || pageR.code !== 0)
      return this.failed(pageR ?? { code: -1, out: Buffer.alloc(0), err: '' }, rev);
    let total = cached;
    if (total === undefined) {
      total = Number(totalR?.out.toString('utf8').trim());
      if (!Number.isFinite(total)) throw new Error(`hg: bad count ${totalR?.err ?? ''}`);
      this.totals.set(node, total);
    }
    return { entries: this.parseJson(pageR).map((j) => this.entry(j)), total };
  }

  async changeset(rev: string): Promise<Changeset> {
    const node = await this.mustResolve(rev);
    const [r] = await this.run(['log', '-r', node, '-T', 'json', '-p', '--git']);
    if (r === undefined || r.code !== 0)
      return this.failed(r ?? { code: -1, out: Buffer.alloc(0), err: '' }, rev);
    const [j] = this.parseJson(r);
    if (j === undefined) throw new ReadNotFound('revision');
    return { ...this.entry(j), diff: j.diff ?? '' };
  }
}
