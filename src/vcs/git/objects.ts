/** The objects `git cat-file --batch-command` answers, and how its answers and objects are parsed. */
import type { Parser } from '../process/process.ts';

export type Obj = { id: string; type: string; size: number; data: Buffer | undefined };
export type Cmd = { op: 'info' | 'contents'; name: string };

export type Commit = {
  id: string;
  tree: string;
  parents: string[];
  author: string;
  authorTime: number;
  message: string;
};

/** Parses one `--batch-command` answer per command, in order. */
export function batchParser(cmds: Cmd[]): Parser<(Obj | undefined)[]> {
  return (buf) => {
    const out: (Obj | undefined)[] = [];
    let at = 0;
    for (const cmd of cmds) {
      const nl = buf.indexOf(10, at);
      if (nl < 0) return undefined;
      const header = buf.toString('utf8', at, nl);
      const parts = header.split(' ');
      if (parts.length !== 3 || /^(missing|ambiguous)$/.test(parts[parts.length - 1] ?? '')) {
        if (/ (missing|ambiguous)$/.test(header)) {
          out.push(undefined);
          at = nl + 1;
          continue;
        }
        throw new Error(`git cat-file: unexpected answer ${JSON.stringify(header.slice(0, 200))}`);
      }
      const size = Number(parts[2]);
      const obj: Obj = { id: parts[0] ?? '', type: parts[1] ?? '', size, data: undefined };
      at = nl + 1;
      if (cmd.op === 'contents') {
        if (buf.length < at + size + 1) return undefined;
        obj.data = buf.subarray(at, at + size);
        at += size + 1;
      }
      out.push(obj);
    }
    return { value: out, used: at };
  };
}

export function parseCommit(id: string, data: Buffer): Commit {
  const text = data.toString('utf8');
  const blank = text.indexOf('\n\n');
  const head = blank < 0 ? text : text.slice(0, blank);
  const message = blank < 0 ? '' : text.slice(blank + 2);
  let tree = '';
  const parents: string[] = [];
  let author = '';
  let authorTime = 0;
  for (const line of head.split('\n')) {
    if (line.startsWith('tree ')) tree = line.slice(5);
    else if (line.startsWith('parent ')) parents.push(line.slice(7));
    else if (line.startsWith('author ')) {
      const m = /^author (.*) (-?\d+) ([+-]\d{4})$/.exec(line);
      if (m !== null) {
        author = m[1] ?? '';
        authorTime = Number(m[2]) * 1000;
      }
    }
  }
  return { id, tree, parents, author, authorTime, message };
}

export type RawEntry = { mode: string; name: string; id: string };

export function parseTree(data: Buffer, hashLen: number): RawEntry[] {
  const out: RawEntry[] = [];
  let at = 0;
  while (at < data.length) {
    const sp = data.indexOf(32, at);
    const nul = data.indexOf(0, sp);
    if (sp < 0 || nul < 0) break;
    const mode = data.toString('latin1', at, sp);
    const name = data.toString('utf8', sp + 1, nul);
    const id = data.toString('hex', nul + 1, nul + 1 + hashLen);
    out.push({ mode: mode.padStart(6, '0'), name, id });
    at = nul + 1 + hashLen;
  }
  return out;
}

export const isTreeMode = (mode: string) => mode === '040000';
export const isBlobMode = (mode: string) => mode.startsWith('10') || mode === '120000';
