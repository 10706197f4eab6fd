import fs from 'node:fs/promises';

/**
 * CPU milliseconds used so far by this process and every live process below it (with what their
 * reaped children used): the benchmark's clients, the servers it started, Triad's backends,
 * worker and command-server processes and its embedded PostgreSQL. Unlike wall-clock time it does
 * not grow with the machine's load. Linux /proc, 100 ticks per second. `root`: another process's
 * tree instead (a server the benchmark started, with its readers and backends).
 */
export async function treeCpuMs(root = process.pid): Promise<number> {
  const fields = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const procs: { pid: number; ppid: number; ticks: number }[] = [];
  for (const name of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, 'utf8').catch(() => undefined);
    if (stat === undefined) continue;
    const f = fields(stat);
    // after ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    const ticks = [11, 12, 13, 14].reduce((a, i) => a + Number(f[i] ?? 0), 0);
    procs.push({ pid: Number(name), ppid: Number(f[1]), ticks });
  }
  const inTree = new Set([root]);
  let total = 0;
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) {
      if (inTree.has(p.pid) || !inTree.has(p.ppid)) continue;
      inTree.add(p.pid);
      grew = true;
    }
  }
  for (const p of procs) if (inTree.has(p.pid)) total += p.ticks;
  return total * 10;
}
