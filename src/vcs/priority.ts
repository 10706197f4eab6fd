/**
 * CPU priority of the processes that do bulk VCS work (the clone URLs' backends: hgweb workers,
 * git http-backend, fossil; and the cat and archive processes of raw downloads and source
 * archives). They are started through `nice`, so they run below the server, its database and its
 * pooled readers: a flood of clones slows the clones, not the API. `nice` lowers the priority
 * before the program starts (its pid stays the same), so every process the program forks inherits
 * it, and no process can raise it back without privileges; an unprivileged server can always lower
 * it. The increment adds to the server's own niceness (capped at 19 by the kernel).
 */

/** The command and arguments that run `command` with its niceness raised by `nice` (none for 0). */
export function niced(nice: number, command: string, args: readonly string[]): [string, string[]] {
  return nice > 0 ? ['nice', ['-n', String(nice), command, ...args]] : [command, [...args]];
}
