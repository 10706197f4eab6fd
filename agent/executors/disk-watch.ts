import { execFile } from 'node:child_process';

/** Bytes `dir` takes on disk (`du`: symbolic links are not followed, one file system only). */
export function diskUsage(dir: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    execFile(
      'nice',
      ['-n', '10', 'du', '-s', '-x', '-B1', '--', dir],
      { timeout: 120_000, maxBuffer: 1 << 20, env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' } },
      (_err, stdout) => {
        // du exits 1 when a file vanished during the walk, and still prints its total
        const n = Number(/^(\d+)\s/.exec(stdout)?.[1]);
        resolve(Number.isSafeInteger(n) ? n : undefined);
      },
    );
  });
}

/**
 * Checks the size of `dir` every `everyMs` while a step runs (where no quota can bound it) and
 * calls `over(bytes)` once when it exceeds `maxBytes`. Answers a function that stops the checks.
 */
export function watchDisk(
  dir: string,
  maxBytes: number,
  over: (bytes: number) => void,
  everyMs = 5000,
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const check = async () => {
    const used = await diskUsage(dir);
    if (stopped) return;
    if (used !== undefined && used > maxBytes) {
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
