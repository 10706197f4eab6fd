import type { EntityManager } from '@mikro-orm/postgresql';
import { randomBytes } from 'node:crypto';
import { hashToken, type AuthUser } from '../domain/access.ts';
import type { Db } from '../db/query.ts';
import { isDbId } from '../db/sql.ts';
import { ApiError } from '../http/errors.ts';
import * as db from './repository.ts';
import type { SessionRow } from './repository.ts';

export type { SessionRow };

/** Where a sign-in came from, as the sessions page shows it. */
export type SessionMeta = { userAgent: string; address: string };

/**
 * Web sessions. The cookie carries a random id (32 bytes); the database keeps only its SHA-256,
 * so a copy of the table signs nobody in. A session ends when it is signed out or revoked, when
 * it has been idle for `idleMs`, `maxMs` after it began, or when its user's password changes.
 * Each session has a form token its pages carry in every form (CSRF), fixed for its life.
 */
export class SessionsService {
  private readonly em: () => EntityManager;
  private readonly idleSeconds: number;
  private readonly maxMs: number;

  constructor(deps: { em: () => EntityManager; idleMs: number; maxMs: number }) {
    this.em = deps.em;
    this.idleSeconds = deps.idleMs / 1000;
    this.maxMs = deps.maxMs;
  }

  /** A new session of `user` and the cookie value naming it (a new id at every sign-in). */
  async start(user: AuthUser, meta: SessionMeta): Promise<{ id: number; cookie: string }> {
    const cookie = newId();
    const em = this.em();
    await db.removeExpired(em, this.idleSeconds);
    const id = await db.insert(em, {
      userId: user.id,
      idHash: hashToken(cookie),
      formToken: randomBytes(24).toString('base64url'),
      userAgent: meta.userAgent.slice(0, 512),
      address: meta.address.slice(0, 64),
      expiresAt: new Date(Date.now() + this.maxMs),
    });
    return { id, cookie };
  }

  /** The live session a cookie value names, or undefined (unknown, expired, idle too long). */
  async resolve(cookie: string): Promise<SessionRow | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(cookie)) return undefined;
    const em = this.em();
    // the last use is recorded at most once a minute (more often when the idle lifetime is short)
    const touch = Math.min(60, this.idleSeconds / 4);
    const s = await db.byHash(em, hashToken(cookie), this.idleSeconds, touch);
    if (s === undefined || s.idle) return undefined;
    if (s.stale) await db.touch(em, s.id);
    return s;
  }

  /** Gives a session a new cookie value (after a password change the session that made it stays). */
  async renew(id: number): Promise<string> {
    const cookie = newId();
    await db.rehash(this.em(), id, hashToken(cookie));
    return cookie;
  }

  /** Signs out the session a cookie value names (nothing when it names none). */
  async endByCookie(cookie: string): Promise<void> {
    await db.removeByHash(this.em(), hashToken(cookie));
  }

  /** In `tx`: every session of the user ends, but `except` (what a password change does). */
  async endAll(tx: Db, userId: number, except: number | undefined): Promise<void> {
    await db.removeAll(tx, userId, except);
  }

  /** The user's live sessions, most recently active first. */
  async list(userId: number): Promise<SessionRow[]> {
    return db.forUser(this.em(), userId, this.idleSeconds);
  }

  /** Ends one of the user's sessions (404 when the user has none of that id). */
  async revoke(userId: number, id: number): Promise<void> {
    if (!isDbId(id) || !(await db.remove(this.em(), userId, id))) throw ApiError.notFound('session');
  }
}

/** A cookie value: 32 random bytes, base64url (43 characters). */
function newId(): string {
  return randomBytes(32).toString('base64url');
}
