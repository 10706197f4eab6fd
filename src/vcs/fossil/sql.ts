/** A SQL text literal that cannot break out of the statement (or line) whatever it holds. */
export function sqlText(s: string): string {
  return `CAST(X'${Buffer.from(s, 'utf8').toString('hex')}' AS TEXT)`;
}

/**
 * Fossil's "backoffice" (e-mail alerts and the like; Triad uses none) would run after web
 * requests in a child that leaves the request's process group (setsid) and can linger for a
 * minute: every repository Triad serves has it off (set at creation, and before serving a
 * repository created earlier).
 */
export const BACKOFFICE_OFF = `REPLACE INTO config(name, value, mtime) VALUES ('backoffice-disable', '1', now()), ('backoffice-nodelay', '1', now())`;
