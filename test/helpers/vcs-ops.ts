/**
 * Server repositories for the VCS-operation tests, filled through the stock clients: a server
 * repository made by the driver's `init` (git bare, hg, fossil file) and a client working copy that
 * commits and pushes to it (Fossil: a check-out opened on the server file).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll } from '@jest/globals';
import { fossilDriver } from '../../src/vcs/fossil/driver.ts';
import { createVcs, type Vcs, type VcsKind } from '../../src/vcs/index.ts';
import type { VcsOps } from '../../src/vcs/ops.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { PersistentProcess, type Parser } from '../../src/vcs/process/process.ts';
import { ok, tempDir, vcsEnv, writeFile } from './vcs.ts';

export const BOB = { name: 'Bob Builder', email: 'bob@example.test' };

/** The mainline's files in the VCS-operation tests (Fossil's add `logo.bin`). */
export const OPS_BASE = { 'a.txt': '1\n2\n3\n4\n5\n6\n7\n8\n9\n', 'b.txt': 'b\n', 'c.txt': 'c1\nc2\nc3\n' };

/** Files to write (text) or delete (null) in a commit. */
export type Files = Record<string, string | null>;

export type Fixture = {
  kind: VcsKind;
  root: string;
  /** The server repository (what the operations act on). */
  srv: string;
  /** Where throw-away working directories go. */
  tmp: string;
  /** A new commit on top of `from` (a ref or commit id) that `ref` then names; returns its id. */
  commit(ref: string, from: string, files: Files, message?: string): Promise<string>;
  /** Refs, tip and the number of commits: equal before and after means "nothing changed". */
  state(): Promise<string>;
  fileAt(rev: string, file: string): Promise<string | undefined>;
  parents(rev: string): Promise<string[]>;
  /** Author as the VCS prints it (git "Name <email>", hg user, fossil user). */
  author(rev: string): Promise<string>;
  message(rev: string): Promise<string>;
  /** Mercurial only: runs `hg ARGS` in the client's working copy or on the server repository. */
  hg?: (where: 'work' | 'srv', ...args: string[]) => Promise<string>;
  cleanup(): Promise<void>;
};

const HG = '/usr/bin/hg';

/** Command-server frames up to the result: output text and the exit code. */
const runParser: Parser<{ out: string; code: number }> = (buf) => {
  let out = '';
  let at = 0;
  for (;;) {
    if (buf.length < at + 5) return undefined;
    const ch = String.fromCharCode(buf[at] ?? 0);
    const len = buf.readUInt32BE(at + 1);
    if (buf.length < at + 5 + len) return undefined;
    const data = buf.subarray(at + 5, at + 5 + len);
    at += 5 + len;
    if (ch === 'r') return { value: { out, code: data.readInt32BE(0) }, used: at };
    if (ch === 'o' || ch === 'e') out += data.toString('utf8');
    if (ch === 'I' || ch === 'L') throw new Error('hg asked for input');
  }
};

/**
 * The stock `hg` client through its command server (`hg serve --cmdserver pipe`), so a test's
 * many hg commands do not each pay Python's start-up.
 */
class HgClient {
  private readonly proc: PersistentProcess;
  constructor(dir: string) {
    this.proc = new PersistentProcess(HG, ['serve', '--cmdserver', 'pipe'], { cwd: dir, env: vcsEnv });
    void this.proc
      .request('', (buf) => {
        if (buf.length < 5) return undefined;
        const len = buf.readUInt32BE(1);
        return buf.length < 5 + len ? undefined : { value: undefined, used: 5 + len };
      })
      .catch(() => undefined);
  }
  /** Output of `hg ARGS`; throws with the output on a non-zero exit unless `allowFail`. */
  async run(args: string[], allowFail = false): Promise<string> {
    const body = Buffer.from(args.join('\0'), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length);
    const r = await this.proc.request(Buffer.concat([Buffer.from('runcommand\n'), head, body]), runParser);
    if (r.code !== 0 && !allowFail) throw new Error(`hg ${args.join(' ')} failed (${r.code}):\n${r.out}`);
    return r.out;
  }
  close(): void {
    this.proc.close();
  }
}

async function write(dir: string, files: Files): Promise<void> {
  for (const [f, content] of Object.entries(files)) {
    if (content === null) await fs.rm(path.join(dir, f), { force: true });
    else await writeFile(dir, f, content);
  }
}

/**
 * A repository whose mainline (git `main`, hg bookmark `@`, fossil `trunk`) has one commit with
 * `initial` files. Returns the fixture and the mainline's name.
 */
export async function makeFixture(kind: VcsKind, initial: Files): Promise<{ fx: Fixture; main: string }> {
  const root = await tempDir(`triad-ops-${kind}-`);
  const srv = path.join(root, kind === 'fossil' ? 'srv.fossil' : 'srv');
  const work = path.join(root, 'work');
  const tmp = path.join(root, 'tmp');
  await createVcs({ pool: new ProcessPool(), tmpDir: tmp }).driver(kind).init(srv);
  const base = {
    kind,
    root,
    srv,
    tmp,
    // retries: a command server that was just told to stop may still be writing its caches
    cleanup: () => fs.rm(root, { recursive: true, force: true, maxRetries: 5 }),
  };
  if (kind === 'git') {
    await ok('git', ['clone', '-q', srv, work], root);
    const git = (...a: string[]) => ok('git', a, work);
    const fx: Fixture = {
      ...base,
      async commit(ref, from, files, message = `change ${ref}`) {
        if (from !== '') {
          // the server may have moved refs (merges): start from its view
          await git('fetch', '-q', '--prune', 'origin');
          await git('checkout', '-q', '-B', ref, /^[0-9a-f]{40}$/.test(from) ? from : `origin/${from}`);
        }
        await write(work, files);
        await git('add', '-A');
        await git('commit', '-q', '--allow-empty', '-m', message);
        await git('push', '-q', '-f', 'origin', `HEAD:refs/heads/${ref}`);
        return (await git('rev-parse', 'HEAD')).trim();
      },
      async state() {
        const refs = await ok('git', ['-C', srv, 'for-each-ref', '--format=%(refname) %(objectname)'], root);
        const count = await ok('git', ['-C', srv, 'rev-list', '--all', '--count'], root);
        return `${refs}\n${count}`;
      },
      fileAt: (rev, file) => ok('git', ['-C', srv, 'show', `${rev}:${file}`], root).catch(() => undefined),
      async parents(rev) {
        return (await ok('git', ['-C', srv, 'log', '-1', '--format=%P', rev], root))
          .trim()
          .split(' ')
          .filter(Boolean);
      },
      async author(rev) {
        return (await ok('git', ['-C', srv, 'log', '-1', '--format=%an <%ae>|%cn <%ce>', rev], root)).trim();
      },
      message: async (rev) => (await ok('git', ['-C', srv, 'log', '-1', '--format=%B', rev], root)).trim(),
    };
    await fx.commit('main', '', initial, 'initial');
    return { fx, main: 'main' };
  }
  if (kind === 'hg') {
    await ok(HG, ['clone', '-q', srv, work], root);
    const client = new HgClient(work);
    const server = new HgClient(srv);
    const hg = (...a: string[]) => client.run(a);
    const onSrv = (...a: string[]) => server.run(a);
    const fx: Fixture = {
      ...base,
      cleanup: async () => {
        client.close();
        server.close();
        await base.cleanup();
      },
      hg: (where, ...a) => (where === 'work' ? client.run(a) : server.run(a)),
      async commit(ref, from, files, message = `change ${ref}`) {
        if (from !== '') {
          // A commit the server made (merge, tag) is pulled first; a bookmark is taken as known.
          await hg('update', '-q', '-C', from).catch(async () => {
            await hg('pull', '-q');
            await hg('update', '-q', '-C', from);
          });
        }
        await hg('bookmark', '-q', '-f', ref);
        await write(work, files);
        const out = await hg('commit', '--debug', '-A', '-m', message);
        await client.run(['push', '-q', '-f', '-B', ref], true); // exit 1 = nothing new
        const id = /committed changeset \d+:([0-9a-f]{40})/.exec(out)?.[1];
        if (id === undefined) throw new Error(`hg commit: ${out}`);
        return id;
      },
      async state() {
        const log = await onSrv(
          'log',
          '--hidden',
          '-r',
          'all()',
          '-T',
          '{node} {phase} {bookmarks} {tags}\n',
        );
        return `${log}${await onSrv('bookmarks')}`;
      },
      fileAt: (rev, file) => onSrv('cat', '-r', rev, `path:${file}`).catch(() => undefined),
      async parents(rev) {
        const out = await onSrv('log', '-r', rev, '-T', '{p1.node} {p2.node}');
        return out.split(' ').filter((p) => p !== '' && !/^0+$/.test(p));
      },
      author: async (rev) => (await onSrv('log', '-r', rev, '-T', '{author}|{phase}')).trim(),
      message: async (rev) => (await onSrv('log', '-r', rev, '-T', '{desc}')).trim(),
    };
    await fx.commit('@', '', initial, 'initial');
    return { fx, main: '@' };
  }
  await fs.mkdir(work);
  // the client's user (USER=ada in the tests' environment) must exist in the repository
  await ok('fossil', ['user', 'new', 'ada', 'ada@example.test', 'secret', '-R', srv], root);
  await ok('fossil', ['open', srv], work);
  const fossil = (...a: string[]) => ok('fossil', a, work);
  const fx: Fixture = {
    ...base,
    async commit(ref, from, files, message = `change ${ref}`) {
      if (from !== '') await fossil('update', from);
      await write(work, files);
      await fossil('addremove');
      const onRef = from === ref || from === '';
      const args = ['commit', '--hash', '--no-warnings', '--allow-empty', '-m', message];
      if (!onRef) args.push('--branch', ref);
      const out = await fossil(...args);
      const id = /New_Version: ([0-9a-f]+)/.exec(out)?.[1];
      if (id === undefined) throw new Error(`fossil commit: ${out}`);
      return id;
    },
    async state() {
      return ok(
        'fossil',
        [
          'sql',
          '-R',
          srv,
          `select b.uuid, coalesce((select group_concat(t.tagname || ':' || x.tagtype) from tagxref x join tag t on t.tagid = x.tagid where x.rid = e.objid), '') from event e join blob b on b.rid = e.objid order by e.objid`,
        ],
        root,
      ).then(async (rows) => `${rows}${JSON.stringify([...(await fossilDriver.snapshot(srv)).branches])}`);
    },
    fileAt: (rev, file) => ok('fossil', ['cat', '-R', srv, '-r', rev, file], root).catch(() => undefined),
    async parents(rev) {
      const out = await ok(
        'fossil',
        [
          'sql',
          '-R',
          srv,
          `select b.uuid from plink p join blob b on b.rid = p.pid where p.cid = (select rid from blob where uuid = '${rev}') order by p.isprim desc`,
        ],
        root,
      );
      return out
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.replace(/'/g, ''));
    },
    async author(rev) {
      const out = await ok(
        'fossil',
        [
          'sql',
          '-R',
          srv,
          `select user from event where objid = (select rid from blob where uuid = '${rev}')`,
        ],
        root,
      );
      return out.trim().replace(/^'|'$/g, '');
    },
    async message(rev) {
      const sql = `select comment from event where objid = (select rid from blob where uuid = '${rev}')`;
      return (await ok('fossil', ['sql', '-R', srv, sql], root)).trim().replace(/^'|'$/g, '');
    },
  };
  // trunk's first check-in is the empty one `fossil new` made; the initial files go on top.
  await fx.commit('trunk', 'trunk', initial, 'initial');
  return { fx, main: 'trunk' };
}

/** What a test file's VCS-operation tests share: filled in by `opsSuite`'s beforeAll. */
export type OpsSuite = {
  fx: Fixture;
  /** The mainline's name (git `main`, hg `@`, fossil `trunk`). */
  main: string;
  set: Vcs;
  ops: VcsOps;
  /** The mainline's head (a test that moves the mainline updates it). */
  base: string;
  /** A fresh target line one commit above `base`; returns its head. */
  line(name: string, files?: Files): Promise<string>;
};

/** A fixture of `kind` made before the enclosing block's tests and removed after them. */
export function opsSuite(kind: VcsKind, initial: Files): OpsSuite {
  const c = {
    line: (name: string, files: Files = { 'b.txt': `b ${name}\n` }) =>
      c.fx.commit(name, c.base, files, `target ${name}`),
  } as OpsSuite;
  beforeAll(async () => {
    ({ fx: c.fx, main: c.main } = await makeFixture(kind, initial));
    c.set = createVcs({ pool: new ProcessPool(), tmpDir: c.fx.tmp, timeoutMs: 20_000 });
    c.ops = c.set.ops(kind);
    c.base = (await c.ops.resolveRef(c.fx.srv, c.main)) ?? '';
  });
  afterAll(async () => {
    c.set.closeProcesses();
    await c.fx.cleanup();
  });
  return c;
}

/** `hg ARGS` in the client's working copy or on the server (through the fixture's command servers). */
export function hgIn(fx: Fixture, where: 'work' | 'srv', ...args: string[]): Promise<string> {
  if (fx.hg === undefined) throw new Error('not a Mercurial fixture');
  return fx.hg(where, ...args);
}

/** A query on a Fossil fixture's server repository, its output trimmed. */
export async function fossilSql(fx: Fixture, q: string): Promise<string> {
  return (await ok('fossil', ['sql', '-R', fx.srv, q], fx.root)).trim();
}
