import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';

/** Each file or directory counts at least this much (so a flood of empty files is bounded too). */
export const BYTES_PER_INODE = 4096;

function du(args: string[], dir: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    execFile(
      'nice',
      ['-n', '10', 'du', '-s', '-x', ...args, '--', dir],
      { timeout: 120_000, maxBuffer: 1 << 20, env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' } },
      (_err, stdout) => {
        // du exits 1 when a file vanished during the walk, and still prints its total
        const n = Number(/^(\d+)\s/.exec(stdout)?.[1]);
        resolve(Number.isSafeInteger(n) ? n : undefined);
      },
    );
  });
}

/** The processes descending from `root` (the sandbox's bwrap), `root` included. */
async function descendants(root: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const name of await fs.readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid ...: comm may hold spaces and parentheses
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!Number.isInteger(ppid)) continue;
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    out.push(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

/**
 * Bytes of files on `dir`'s file system that processes of the sandbox `root` hold open after
 * deleting them (invisible to `du`, still on the disk).
 */
async function deletedButOpen(dir: string, root: number): Promise<number> {
  const dev = (await fs.stat(dir)).dev;
  const seen = new Set<number>();
  let bytes = 0;
  for (const pid of await descendants(root)) {
    for (const fd of await fs.readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      const st = await fs.stat(`/proc/${pid}/fd/${fd}`).catch(() => undefined);
      if (st === undefined || !st.isFile() || st.nlink !== 0 || st.dev !== dev || seen.has(st.ino)) continue;
      seen.add(st.ino);
      bytes += st.blocks * 512;
    }
  }
  return bytes;
}

/**
 * What `dir` takes on disk (`du`: symbolic links are not followed, one file system only): its
 * blocks, or `BYTES_PER_INODE` per file and directory when that is more, plus the deleted files
 * the sandbox `root` still holds open. Undefined when it cannot be measured.
 */
export async function diskUsage(dir: string, root?: number): Promise<number | undefined> {
  const bytes = await du(['-B1'], dir);
  const inodes = await du(['--inodes'], dir);
  if (bytes === undefined || inodes === undefined) return undefined;
  const hidden = root === undefined ? 0 : await deletedButOpen(dir, root).catch(() => 0);
  return Math.max(bytes, inodes * BYTES_PER_INODE) + hidden;
}

/**
 * Measures `dir` every `everyMs` while a step (or the clone) runs, where no quota can bound it,
 * and calls `over(bytes)` once when it exceeds `maxBytes`, or `over(undefined)` when it cannot
 * be measured (a walk that takes minutes is itself a sign of abuse). `root()` names the running
 * sandbox's process. Answers a function that stops the checks.
 */
export function watchDisk(
  dir: string,
  maxBytes: number,
  over: (bytes: number | undefined) => void,
  everyMs = 5000,
  root: () => number | undefined = () => undefined,
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const check = async () => {
    const used = await diskUsage(dir, root());
    if (stopped) return;
    if (used === undefined || used > maxBytes) {
      stopped = true;
      over(used);
      return;
    }
    timer = setTimeout(() => void check(), everyMs);
  };
  timer = setTimeout(() => void check(), everyMs);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** `10737418240` as `10 GiB`, for messages. */
export function formatBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : Number(v.toFixed(1))} ${units[i]}`;
}
