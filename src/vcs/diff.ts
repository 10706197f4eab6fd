import { isUtf8 } from 'node:buffer';
import type { ContentLimits, DiffResult } from './reader.ts';

/*
 * Git-style unified diffs shared by the git and Fossil readers (Mercurial's extension produces
 * its own with the same caps): Myers edit scripts, file sections, and the size caps.
 */

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
  // k runs from -max to max and each round also reads k - 1 and k + 1, and the trace keeps
  // k = -d-1 .. d+1 of round d: one slot beyond each end (a slice from a negative index would
  // count from the array's end, and backtracking a full replacement read the wrong round)
  const off = max + 1;
  const budget = 4_000_000;
  const v = new Int32Array(2 * max + 3);
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
  // A last line without its newline is another line than the same text with one (git and diff
  // -u show it changed, and mark it): it is compared as its text and a '\n', which no line split
  // at newlines can hold.
  const tokens = (text: string) => {
    const lines = splitLines(text);
    if (text !== '' && !text.endsWith('\n')) lines[lines.length - 1] += '\n';
    return lines;
  };
  const ops = editScript(tokens(oldText), tokens(newText));
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
      if (op.line.endsWith('\n')) {
        body.push(`${op.kind}${op.line.slice(0, -1)}`, '\\ No newline at end of file');
      } else {
        body.push(`${op.kind}${op.line}`);
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
      if (!out.open) break;
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
