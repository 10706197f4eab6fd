/**
 * The session cookie: `triad_session`, or `__Host-triad_session` when the base URL is https (then
 * `Secure`, and the prefix makes browsers refuse it from a sub-domain or with a `Domain`).
 * Always `HttpOnly`, `SameSite=Lax`, `Path=/`; it lasts as long as the session may.
 */
import { parse, serialize } from 'cookie';
import type { Request, Response } from 'express';

export type SessionCookie = {
  name: string;
  read(req: Request): string | undefined;
  set(res: Response, value: string): void;
  clear(res: Response): void;
};

/** The cookie of a server whose public address is `baseUrl`, kept `maxAgeMs` (`TRIAD_SESSION_MAX`). */
export function sessionCookie(baseUrl: string, maxAgeMs: number): SessionCookie {
  const maxAgeSeconds = Math.max(1, Math.floor(maxAgeMs / 1000));
  const secure = baseUrl.startsWith('https:');
  const name = secure ? '__Host-triad_session' : 'triad_session';
  const attrs = { httpOnly: true, sameSite: 'lax', secure, path: '/' } as const;
  return {
    name,
    read: (req) => {
      const header = req.headers.cookie;
      if (header === undefined) return undefined;
      return parse(header)[name];
    },
    set: (res, value) =>
      res.append('Set-Cookie', serialize(name, value, { ...attrs, maxAge: maxAgeSeconds })),
    clear: (res) => res.append('Set-Cookie', serialize(name, '', { ...attrs, maxAge: 0 })),
  };
}
