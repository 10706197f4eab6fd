import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { isUtf8 } from 'node:buffer';
import type { VcsKind } from './index.ts';

// ------------------------------------------------------------------ shapes

export type TreeEntry = { name: string; is_dir: boolean; size: number };
/**
 * `size` is the file's full size; `content` holds at most the blob cap's worth of it, cut at a
 * character boundary for text, and `truncated` says whether it was cut.
 */
export type BlobContent = {
  path: string;
  content: string;
  size: number;
  encoding: 'utf-8' | 'base64';
  truncated: boolean;
};
export type LogEntry = {
  id: string;
  short_id: string;
  author: string;
  date: string;
  subject: string;
  message: string;
  branch: string;
  tags: string[];
};
/**
 * `diff_truncated`: the diff is incomplete (a file shown by its header only, or sections left out
 * at the total cap); `diff_truncated_files`: the files shown by their header only.
 */
export type DiffResult = { diff: string; diff_truncated: boolean; diff_truncated_files: string[] };
export type Changeset = LogEntry & DiffResult;

/** Size caps of contents reads (bytes); see `DEFAULT_LIMITS` and docs/api.md "Limits". */
export type ContentLimits = {
  /** Blob reads return at most this much content (`truncated: true` beyond). */
  blobMaxBytes: number;
  /** A file whose either version, or whose diff section, is larger is shown by its header only. */
  diffMaxFileBytes: number;
  /** The whole diff: a section that would pass it is left out with every later one. */
  diffMaxBytes: number;
};
export const DEFAULT_LIMITS: ContentLimits = {
  blobMaxBytes: 4 * 1024 * 1024,
  diffMaxFileBytes: 1024 * 1024,
  diffMaxBytes: 4 * 1024 * 1024,
};
export type LogPage = { entries: LogEntry[]; total: number };

/**
 * Read access to one repository. `resolve` answers undefined for an unknown revision; the other
 * reads throw `ReadNotFound` (unknown revision, missing path, wrong kind of path, empty
 * repository). `path` is normalised by `normalisePath` before it reaches a driver ('' = root).
 */
export interface RepoReader {
  resolve(rev: string): Promise<string | undefined>;
  tree(rev: string, path: string): Promise<TreeEntry[]>;
  /** At most `maxBytes` of content (default `DEFAULT_LIMITS.blobMaxBytes`); larger files are cut. */
  blob(rev: string, path: string, maxBytes?: number): Promise<BlobContent>;
  log(rev: string, page: number, perPage: number): Promise<LogPage>;
  /** The diff against the first parent, capped by `limits` (default `DEFAULT_LIMITS`). */
  changeset(rev: string, limits?: ContentLimits): Promise<Changeset>;
  /** True while a request is queued or running (the pool never evicts a busy reader). */
  busy(): boolean;
  /** Ends the persistent processes once queued work is done. */
  close(): void;
}

export type NotFoundKind = 'revision' | 'path' | 'file' | 'directory' | 'empty';

/** A read that names nothing: the HTTP layer answers 404. */
export class ReadNotFound extends Error {
  readonly kind: NotFoundKind;
  constructor(kind: NotFoundKind, message?: string) {
    super(message ?? (kind === 'empty' ? 'repository is empty' : `${kind} not found`));
    this.kind = kind;
  }
}

/** A request path that could escape the repository or is malformed: the HTTP layer answers 400. */
export class BadPath extends Error {}

// ------------------------------------------------------------------ helpers shared by drivers

/**
 * Normalises a repository path given as URL segments (Express 5 wildcard) or a string.
 * Rejects (BadPath) NUL and other control characters, backslashes, absolute paths and `..`
 * segments; drops empty and `.` segments. Returns '' for the repository root.
 */
export function normalisePath(input: string | readonly string[] | undefined): string {
  if (input === undefined) return '';
  const raw = typeof input === 'string' ? input : input.join('/');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) throw new BadPath('path must not contain control characters');
  if (raw.includes('\\')) throw new BadPath('path must not contain backslashes');
  if (raw.startsWith('/')) throw new BadPath('path must be relative to the repository root');
  const parts: string[] = [];
  for (const seg of raw.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') throw new BadPath('path must not contain ".." segments');
    parts.push(seg);
  }
  return parts.join('/');
}

/** A revision as text a driver may look up; anything else names nothing (404). */
export function plausibleRev(rev: string): boolean {
  // eslint-disable-next-line no-control-regex
  return rev.length > 0 && rev.length <= 256 && !/[\u0000-\u001f\u007f]/.test(rev);
}

/**
 * A blob answer from the file's bytes (or their first part) and its full size. Content beyond
 * `maxBytes` is cut; a cut text file ends before a character split by the cut, so it stays
 * UTF-8 (never turns into base64 because of the cut).
 */
export function blobContent(
  path: string,
  data: Buffer,
  size = data.length,
  maxBytes = DEFAULT_LIMITS.blobMaxBytes,
): BlobContent {
  let bytes = data.length > maxBytes ? data.subarray(0, maxBytes) : data;
  const cut = bytes.length < size;
  let text = !bytes.includes(0) && isUtf8(bytes);
  if (!text && cut && !bytes.includes(0)) {
    // A cut may split one multi-byte character (at most 3 bytes of it).
    for (let drop = 1; drop <= 3 && drop < bytes.length && !text; drop += 1) {
      if (isUtf8(bytes.subarray(0, bytes.length - drop))) {
        bytes = bytes.subarray(0, bytes.length - drop);
        text = true;
      }
    }
  }
  return {
    path,
    content: text ? bytes.toString('utf8') : bytes.toString('base64'),
    size,
    encoding: text ? 'utf-8' : 'base64',
    truncated: cut,
  };
}

/**
 * The first `max` bytes a command writes to stdout (the whole output when shorter); the command
 * is killed once enough is read, so a huge output is never held in memory.
 */
export function readPrefix(
  cmd: string,
  args: string[],
  max: number,
  env?: NodeJS.ProcessEnv,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: env ?? process.env, stdio: ['ignore', 'pipe', 'ignore'] });
    const parts: Buffer[] = [];
    let have = 0;
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      if (err !== undefined) reject(err);
      else resolve(Buffer.concat(parts, Math.min(have, max)).subarray(0, max));
    };
    child.stdout.on('data', (d: Buffer) => {
      if (done) return;
      parts.push(d);
      have += d.length;
      if (have >= max) {
        child.kill('SIGKILL');
        finish();
      }
    });
    child.on('error', (e) => finish(e));
    child.on('close', (code, signal) => {
      if (code === 0 || have >= max) finish();
      else finish(new Error(`${cmd} exited (${signal ?? code ?? '?'})`));
    });
  });
}

export function isoUtc(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function splitMessage(message: string): { subject: string; message: string } {
  const m = message.replace(/\s+$/, '');
  return { subject: m.split('\n', 1)[0] ?? '', message: m };
}

/** Dirs first, then files, each by name (code unit order, like the VCSs). */
export function sortEntries(entries: TreeEntry[]): TreeEntry[] {
  return entries.sort((a, b) =>
    a.is_dir !== b.is_dir ? (a.is_dir ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
}

/** Small LRU map (insertion order = recency). */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get(k: K): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }
  set(k: K, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    while (this.map.size > this.max) {
      const first = this.map.keys().next();
      if (first.done === true) break;
      this.map.delete(first.value);
    }
  }
  clear(): void {
    this.map.clear();
  }
}

// ------------------------------------------------------------------ unified diff

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

type Op = { kind: ' ' | '-' | '+'; line: string };

/** Myers O(ND) edit script between two line arrays (full replacement when it would be too costly). */
function editScript(a: string[], b: string[]): Op[] {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre += 1;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) {
    suf += 1;
  }
  const A = a.slice(pre, a.length - suf);
  const B = b.slice(pre, b.length - suf);
  const head: Op[] = a.slice(0, pre).map((line) => ({ kind: ' ', line }));
  const tail: Op[] = a.slice(a.length - suf).map((line) => ({ kind: ' ', line }));
  // Within each block of changes, deletions first (as diff -u and git print them).
  const middle: Op[] = [];
  let dels: Op[] = [];
  let adds: Op[] = [];
  // Element by element: a spread of a large block into push() would overflow the call stack.
  const flush = () => {
    for (const op of dels) middle.push(op);
    for (const op of adds) middle.push(op);
    dels = [];
    adds = [];
  };
  for (const op of myers(A, B)) {
    if (op.kind === '-') dels.push(op);
    else if (op.kind === '+') adds.push(op);
    else {
      flush();
      middle.push(op);
    }
  }
  flush();
  return head.concat(middle, tail);
}

function myers(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  const replace = (): Op[] => [
    ...a.map((line): Op => ({ kind: '-', line })),
    ...b.map((line): Op => ({ kind: '+', line })),
  ];
  if (n === 0 || m === 0) return replace();
  const max = n + m;
  const off = max;
  const budget = 4_000_000;
  const v = new Int32Array(2 * max + 2);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max; d += 1) {
    if ((d + 1) * (2 * d + 1) > budget) return replace();
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x: number;
      if (k === -d || (k !== d && (v[off + k - 1] ?? 0) < (v[off + k + 1] ?? 0))) x = v[off + k + 1] ?? 0;
      else x = (v[off + k - 1] ?? 0) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x += 1;
        y += 1;
      }
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  // Backtrack: trace[d] holds v before round d, indexed from k = -d-1.
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d -= 1) {
    const vd = trace[d] ?? new Int32Array(0);
    const at = (k: number) => vd[k + d + 1] ?? 0;
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x -= 1;
      y -= 1;
      ops.push({ kind: ' ', line: a[x] ?? '' });
    }
    if (prevK === k + 1) {
      y -= 1;
      ops.push({ kind: '+', line: b[y] ?? '' });
    } else {
      x -= 1;
      ops.push({ kind: '-', line: a[x] ?? '' });
    }
  }
  while (x > 0 && y > 0) {
    x -= 1;
    y -= 1;
    ops.push({ kind: ' ', line: a[x] ?? '' });
  }
  return ops.reverse();
}

/** Unified diff hunks (3 lines of context) between two texts; '' when equal. */
export function unifiedHunks(oldText: string, newText: string, context = 3): string {
  if (oldText === newText) return '';
  const a = splitLines(oldText);
  const b = splitLines(newText);
  const aNoEol = oldText !== '' && !oldText.endsWith('\n');
  const bNoEol = newText !== '' && !newText.endsWith('\n');
  const ops = editScript(a, b);
  // Last lines differing only in the final newline must show as a change.
  if ((aNoEol !== bNoEol || a.length !== b.length) && ops.length > 0) {
    const last = ops[ops.length - 1];
    if (last !== undefined && last.kind === ' ' && aNoEol !== bNoEol) {
      ops.pop();
      ops.push({ kind: '-', line: last.line }, { kind: '+', line: last.line });
    }
  }
  const out: string[] = [];
  let i = 0;
  let ai = 0;
  let bi = 0;
  const pos: { ai: number; bi: number }[] = [];
  for (const op of ops) {
    pos.push({ ai, bi });
    if (op.kind !== '+') ai += 1;
    if (op.kind !== '-') bi += 1;
  }
  while (i < ops.length) {
    while (i < ops.length && ops[i]?.kind === ' ') i += 1;
    if (i >= ops.length) break;
    const start = Math.max(0, i - context);
    let end = i;
    // Extend while the next change is within 2*context lines.
    for (;;) {
      while (end < ops.length && ops[end]?.kind !== ' ') end += 1;
      let j = end;
      while (j < ops.length && ops[j]?.kind === ' ' && j - end < 2 * context) j += 1;
      if (j < ops.length && ops[j]?.kind !== ' ' && j - end <= 2 * context) {
        end = j;
        continue;
      }
      break;
    }
    const stop = Math.min(ops.length, end + context);
    const p = pos[start] ?? { ai: 0, bi: 0 };
    let na = 0;
    let nb = 0;
    const body: string[] = [];
    for (let j = start; j < stop; j += 1) {
      const op = ops[j];
      if (op === undefined) break;
      if (op.kind !== '+') na += 1;
      if (op.kind !== '-') nb += 1;
      body.push(`${op.kind}${op.line}`);
      const isLastA = op.kind !== '+' && (pos[j]?.ai ?? 0) === a.length - 1;
      const isLastB = op.kind !== '-' && (pos[j]?.bi ?? 0) === b.length - 1;
      if ((op.kind === '-' && isLastA && aNoEol) || (op.kind === '+' && isLastB && bNoEol)) {
        body.push('\\ No newline at end of file');
      } else if (op.kind === ' ' && isLastA && aNoEol) {
        body.push('\\ No newline at end of file');
      }
    }
    const range = (s: number, n: number) => (n === 1 ? `${s + 1}` : `${n === 0 ? s : s + 1},${n}`);
    out.push(`@@ -${range(p.ai, na)} +${range(p.bi, nb)} @@`);
    for (const line of body) out.push(line);
    i = stop;
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

export type FileChange = {
  oldPath: string | undefined;
  newPath: string | undefined;
  oldMode?: string;
  newMode?: string;
  oldId?: string;
  newId?: string;
  oldData: Buffer | undefined;
  newData: Buffer | undefined;
};

/** One file's section of a git-style diff. */
export function gitDiffSection(c: FileChange): string {
  const { header, body } = gitDiffParts(c);
  return header + body;
}

/** A file's section of a git-style diff in two parts: its header lines and the rest. */
export function gitDiffParts(c: FileChange): { header: string; body: string } {
  const a = c.oldPath ?? c.newPath ?? '';
  const b = c.newPath ?? c.oldPath ?? '';
  const lines = [`diff --git a/${a} b/${b}`];
  if (c.oldPath === undefined) lines.push(`new file mode ${c.newMode ?? '100644'}`);
  else if (c.newPath === undefined) lines.push(`deleted file mode ${c.oldMode ?? '100644'}`);
  else if (c.oldMode !== undefined && c.newMode !== undefined && c.oldMode !== c.newMode) {
    lines.push(`old mode ${c.oldMode}`, `new mode ${c.newMode}`);
  }
  if (c.oldId !== undefined || c.newId !== undefined) {
    const z = '0000000000';
    lines.push(`index ${(c.oldId ?? z).slice(0, 10)}..${(c.newId ?? z).slice(0, 10)}`);
  }
  const header = `${lines.join('\n')}\n`;
  const oldData = c.oldData ?? Buffer.alloc(0);
  const newData = c.newData ?? Buffer.alloc(0);
  if (oldData.equals(newData)) return { header, body: '' };
  const binary = [oldData, newData].some((d) => d.includes(0) || !isUtf8(d));
  const from = c.oldPath === undefined ? '/dev/null' : `a/${a}`;
  const to = c.newPath === undefined ? '/dev/null' : `b/${b}`;
  if (binary) return { header, body: `Binary files ${from} and ${to} differ\n` };
  const hunks = unifiedHunks(oldData.toString('utf8'), newData.toString('utf8'));
  return { header, body: `--- ${from}\n+++ ${to}\n${hunks}` };
}

/**
 * Collects a diff's file sections in path order under the caps: a section larger than
 * `diffMaxFileBytes` (or given without a body because a version of the file is) keeps its header
 * only; the first section that would take the total past `diffMaxBytes` is left out with every
 * later one.
 */
export class DiffBuilder {
  private readonly limits: ContentLimits;
  private readonly parts: string[] = [];
  private bytes = 0;
  private full = false;
  private readonly cut: string[] = [];

  constructor(limits: ContentLimits) {
    this.limits = limits;
  }

  /** False once the total cap was reached: later sections are not wanted. */
  get open(): boolean {
    return !this.full;
  }

  add(path: string, header: string, body: string | undefined): void {
    if (this.full) return;
    let section = body === undefined ? header : header + body;
    let size = Buffer.byteLength(section);
    let headerOnly = body === undefined;
    if (!headerOnly && size > this.limits.diffMaxFileBytes) {
      section = header;
      size = Buffer.byteLength(header);
      headerOnly = true;
    }
    if (this.bytes + size > this.limits.diffMaxBytes) {
      this.full = true;
      return;
    }
    this.parts.push(section);
    this.bytes += size;
    if (headerOnly) this.cut.push(path);
  }

  result(): DiffResult {
    return {
      diff: this.parts.join(''),
      diff_truncated: this.full || this.cut.length > 0,
      diff_truncated_files: this.cut,
    };
  }
}

/** A changed file before its contents are read: blob ids and sizes from the repository. */
export type SizedChange = Omit<FileChange, 'oldData' | 'newData'> & {
  oldSize: number | undefined;
  newSize: number | undefined;
};

/**
 * Builds a capped git-style diff from changes in path order. Contents are read through `load`
 * (blob id -> bytes) in batches, only for files within the per-file cap and only until the
 * total cap is reached, so a huge file or changeset is never read whole.
 */
export async function cappedDiff(
  changes: SizedChange[],
  load: (ids: string[]) => Promise<Map<string, Buffer | undefined>>,
  limits: ContentLimits,
): Promise<DiffResult> {
  const out = new DiffBuilder(limits);
  const tooBig = (c: SizedChange) => Math.max(c.oldSize ?? 0, c.newSize ?? 0) > limits.diffMaxFileBytes;
  let i = 0;
  while (i < changes.length && out.open) {
    // The next batch: files within the per-file cap, up to about the total cap's worth of input.
    const batch: SizedChange[] = [];
    let input = 0;
    for (let j = i; j < changes.length && batch.length < 256 && input <= limits.diffMaxBytes; j += 1) {
      const c = changes[j];
      if (c === undefined || tooBig(c)) break;
      batch.push(c);
      input += (c.oldSize ?? 0) + (c.newSize ?? 0);
    }
    if (batch.length === 0) {
      const c = changes[i];
      if (c !== undefined)
        out.add(
          c.newPath ?? c.oldPath ?? '',
          gitDiffParts({ ...c, oldData: undefined, newData: undefined }).header,
          undefined,
        );
      i += 1;
      continue;
    }
    const ids = batch.flatMap((c) => [c.oldId, c.newId]).filter((x): x is string => x !== undefined);
    const data = await load([...new Set(ids)]);
    for (const c of batch) {
      const { header, body } = gitDiffParts({
        ...c,
        oldData: c.oldId === undefined ? undefined : data.get(c.oldId),
        newData: c.newId === undefined ? undefined : data.get(c.newId),
      });
      out.add(c.newPath ?? c.oldPath ?? '', header, body);
    }
    i += batch.length;
  }
  return out.result();
}

// ------------------------------------------------------------------ persistent processes

/** Parses a response from the front of `buf`: the value and bytes used, or undefined for "need more". */
export type Parser<T> = (buf: Buffer) => { value: T; used: number } | undefined;

type Pending = {
  parse: Parser<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
};

export class ProcessDied extends Error {}

/**
 * One long-lived child process spoken to over stdin/stdout, one request at a time (requests are
 * queued, so a repository's reads are serialised on it). Stderr is kept for the current request.
 */
export class PersistentProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  private buf: Buffer = Buffer.alloc(0);
  private stderr = '';
  private readonly queue: { write: Buffer | string; pending: Pending }[] = [];
  private current: Pending | undefined;
  private closing = false;
  dead = false;

  constructor(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv }) {
    this.child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: 'pipe' });
    this.child.stdout.on('data', (d: Buffer) => {
      this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
      this.drain();
    });
    this.child.stderr.on('data', (d: Buffer) => {
      if (this.stderr.length < 64 * 1024) this.stderr += d.toString('utf8');
    });
    this.child.stdin.on('error', () => undefined);
    const died = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      const err = new ProcessDied(`${cmd} ${why}${this.stderr === '' ? '' : `: ${this.stderr.trim()}`}`);
      this.current?.reject(err);
      this.current = undefined;
      for (const q of this.queue.splice(0)) q.pending.reject(err);
    };
    this.child.on('error', (e) => died(`failed: ${e.message}`));
    this.child.on('exit', (code, signal) => died(`exited (${signal ?? code ?? '?'})`));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  busy(): boolean {
    return this.current !== undefined || this.queue.length > 0;
  }

  /** Stderr written since the current request started. */
  takeStderr(): string {
    const s = this.stderr;
    this.stderr = '';
    return s;
  }

  request<T>(write: Buffer | string, parse: Parser<T>): Promise<T> {
    if (this.dead || this.closing) return Promise.reject(new ProcessDied('process is closed'));
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { parse, resolve: resolve as (v: unknown) => void, reject };
      this.queue.push({ write, pending });
      if (this.current === undefined) this.next();
    });
  }

  private next(): void {
    const item = this.queue.shift();
    if (item === undefined) {
      if (this.closing) this.child.stdin.end();
      return;
    }
    this.current = item.pending;
    this.stderr = '';
    this.child.stdin.write(item.write);
    this.drain();
  }

  private drain(): void {
    const cur = this.current;
    if (cur === undefined || this.buf.length === 0) return;
    let r: { value: unknown; used: number } | undefined;
    try {
      r = cur.parse(this.buf);
    } catch (e) {
      this.current = undefined;
      cur.reject(e instanceof Error ? e : new Error(String(e)));
      this.kill();
      return;
    }
    if (r === undefined) return;
    this.buf = this.buf.subarray(r.used);
    this.current = undefined;
    cur.resolve(r.value);
    this.next();
  }

  /** Ends stdin once queued requests are done (the process exits on EOF). */
  close(): void {
    this.closing = true;
    if (!this.busy()) {
      this.child.stdin.end();
      const t = setTimeout(() => this.kill(), 5000);
      t.unref();
      this.child.once('exit', () => clearTimeout(t));
    }
  }

  kill(): void {
    if (!this.dead) this.child.kill('SIGKILL');
  }
}

/**
 * Holds one persistent process and replaces it when it dies: a request that fails because the
 * process crashed is retried once on a fresh process.
 */
export class Respawning {
  private proc: PersistentProcess | undefined;
  private readonly start: () => PersistentProcess;
  private closed = false;

  constructor(start: () => PersistentProcess) {
    this.start = start;
  }

  get(): PersistentProcess {
    if (this.closed) throw new ProcessDied('reader is closed');
    if (this.proc === undefined || this.proc.dead) this.proc = this.start();
    return this.proc;
  }

  async run<T>(fn: (p: PersistentProcess) => Promise<T>): Promise<T> {
    try {
      return await fn(this.get());
    } catch (e) {
      if (!(e instanceof ProcessDied) || this.closed) throw e;
      return fn(this.get());
    }
  }

  busy(): boolean {
    return this.proc?.busy() === true;
  }

  close(): void {
    this.closed = true;
    this.proc?.close();
  }
}

/** Serialises async work (for drivers whose one request is several process round trips). */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  lock<T>(fn: () => Promise<T>): Promise<T> {
    this.waiting += 1;
    const run = this.tail.then(fn, fn);
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run.finally(() => {
      this.waiting -= 1;
    });
  }
  busy(): boolean {
    return this.waiting > 0;
  }
}

// ------------------------------------------------------------------ pool

export type ReaderFactory = (vcs: VcsKind, repoPath: string) => RepoReader;

export type PoolOptions = {
  /** Most repositories with live processes at once (one persistent process each). */
  max?: number;
  /** A reader unused this long is closed. */
  idleMs?: number;
};

type Slot = { reader: RepoReader; vcs: VcsKind; lastUsed: number };

/**
 * At most `max` readers (each one persistent process) across all repositories, least recently
 * used evicted first, idle ones closed after `idleMs`. `invalidate` drops a repository's reader
 * after a push so the next read starts afresh.
 */
export class ReaderPool {
  private readonly slots = new Map<string, Slot>();
  private readonly max: number;
  private readonly idleMs: number;
  private readonly factory: ReaderFactory;
  private readonly timer: NodeJS.Timeout;

  constructor(factory: ReaderFactory, opts: PoolOptions = {}) {
    this.factory = factory;
    this.max = Math.max(1, opts.max ?? 32);
    this.idleMs = opts.idleMs ?? 60_000;
    this.timer = setInterval(() => this.evictIdle(), Math.max(1000, Math.min(this.idleMs / 2, 15_000)));
    this.timer.unref();
  }

  get(vcs: VcsKind, repoPath: string): RepoReader {
    const now = Date.now();
    const slot = this.slots.get(repoPath);
    if (slot !== undefined && slot.vcs === vcs) {
      this.slots.delete(repoPath);
      slot.lastUsed = now;
      this.slots.set(repoPath, slot);
      return slot.reader;
    }
    if (slot !== undefined) this.drop(repoPath);
    const reader = this.factory(vcs, repoPath);
    this.slots.set(repoPath, { reader, vcs, lastUsed: now });
    if (this.slots.size > this.max) {
      // Least recently used first; a busy reader is closed gracefully (after its queue drains).
      for (const key of this.slots.keys()) {
        if (this.slots.size <= this.max) break;
        if (key !== repoPath) this.drop(key);
      }
    }
    return reader;
  }

  /** Forget a repository's processes and caches (after a push, a delete). */
  invalidate(repoPath: string): void {
    this.drop(repoPath);
  }

  size(): number {
    return this.slots.size;
  }

  evictIdle(now = Date.now()): void {
    for (const [key, slot] of this.slots) {
      if (now - slot.lastUsed >= this.idleMs && !slot.reader.busy()) this.drop(key);
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const key of [...this.slots.keys()]) this.drop(key);
  }

  private drop(key: string): void {
    const slot = this.slots.get(key);
    if (slot === undefined) return;
    this.slots.delete(key);
    slot.reader.close();
  }
}
