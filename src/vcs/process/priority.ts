/**
 * CPU priority of the processes that do bulk VCS work (the clone URLs' backends: hgweb workers,
 * git http-backend, fossil; and the cat and archive processes of raw downloads and source
 * archives). They are started with their niceness raised, so they run below the server, its
 * database and its pooled readers: a flood of clones slows the clones, not the API. The priority
 * is lowered before the program starts (its pid stays the same: the shell and `nice` exec it), so
 * every process the program forks inherits it, and an unprivileged program cannot raise it back;
 * lowering needs no privilege. The increment adds to the server's own niceness (the kernel caps
 * the result at 19).
 *
 * These processes are started in a session of their own (`detached`, for their process group).
 * Where the kernel groups processes by session for scheduling (autogroup: `kernel.sched_autogroup_
 * enabled`, processes outside any CPU cgroup), a niceness only ranks a process against the others
 * of its session, and each session weighs as much as the server's whole session: so the session's
 * autogroup is given the same niceness (`/proc/self/autogroup`; best effort: without autogroup
 * support, or when an unprivileged writer hits the kernel's rate limit, it stays as it was).
 */

/** Lowers the session's autogroup, then execs `nice -n N` with the program. Arguments: N, program... */
const LOWER = `n=$1; shift; { echo "$n" > /proc/self/autogroup; } 2>/dev/null; exec nice -n "$n" "$@"`;

/**
 * The command and arguments that run `command` with its niceness raised by `nice` (unchanged for
 * 0). Only for a process started in a new session (`detached`): it lowers the whole session.
 */
export function niced(nice: number, command: string, args: readonly string[]): [string, string[]] {
  return nice > 0
    ? ['/bin/sh', ['-c', LOWER, 'triad-nice', String(nice), command, ...args]]
    : [command, [...args]];
}
