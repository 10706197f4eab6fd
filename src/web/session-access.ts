/**
 * A web session as the authorization layer sees it: its user with every scope at the personal
 * level (DESIGN section 9: a session is its user's full rights; organization roles still decide).
 */
import type { Request } from 'express';
import { ALL_SCOPES } from '../domain/access.ts';
import { Access, type Directory, type Principal } from '../http/auth.ts';
import { sessionCookie } from './cookies.ts';
import type { SessionRow, SessionsService } from './sessions.ts';

export function sessionPrincipal(s: SessionRow | undefined): Principal {
  if (s === undefined) return { kind: 'anonymous' };
  return {
    kind: 'user',
    user: { id: s.userId, username: s.username, isAdmin: s.isAdmin },
    grant: { id: null, scopes: ALL_SCOPES, level: 'personal', targetOrgId: null, targetRepoId: null },
  };
}

/** The `Access` of a request's session cookie (undefined without a live session): for `/api/v1` routes declared `session`. */
export function sessionAccess(d: {
  sessions: SessionsService;
  dir: Directory;
  baseUrl: () => string;
  sessionMaxMs: number;
}): (req: Request) => Promise<Access | undefined> {
  return async (req) => {
    const cookie = sessionCookie(d.baseUrl(), d.sessionMaxMs).read(req);
    const s = cookie === undefined ? undefined : await d.sessions.resolve(cookie);
    return s === undefined ? undefined : new Access(sessionPrincipal(s), d.dir);
  };
}
