import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import { hashToken, newTokenValue, type AuthUser } from '../domain/access.ts';
import type { Db } from '../db/query.ts';
import * as db from './repository.ts';
import { hashPassword, verifyPassword } from './password-hash.ts';
import { passwordSchema } from './schemas.ts';

/** What else ends when a user's password changes: their web sessions (all, or all but one). */
export type OnPasswordChange = (tx: Db, userId: number, keepSession: number | undefined) => Promise<void>;

/**
 * Passwords, which sign in to the web interface only (the API takes tokens). A user may have
 * none. Setting one ends the user's web sessions (but the one that set it, when a session did) and
 * voids the user's one-time password links. Sign-in takes a username, or an e-mail address.
 */
export class PasswordsService {
  private readonly em: () => EntityManager;
  private readonly onChange: OnPasswordChange;

  constructor(deps: { em: () => EntityManager; onChange?: OnPasswordChange }) {
    this.em = deps.em;
    this.onChange = deps.onChange ?? (() => Promise.resolve());
  }

  async has(userId: number): Promise<boolean> {
    return ((await db.passwordById(this.em(), userId))?.passwordHash ?? null) !== null;
  }

  /** Sets the password (400 when it is not a valid one); `keepSession`: the session that set it stays. */
  async set(userId: number, password: string, keepSession?: number): Promise<void> {
    const hash = await this.hash(password);
    await this.em().transactional((tx) => this.store(tx, userId, hash, keepSession));
  }

  /** The hash of a new password (400 when it is not a valid one), for `store`. */
  async hash(password: string): Promise<string> {
    const checked = passwordSchema.safeParse(password);
    if (!checked.success)
      throw ApiError.validation(`password: ${checked.error.issues[0]?.message ?? 'invalid'}`);
    return hashPassword(password);
  }

  /** In `tx`: the user's password becomes `hash`; links go, sessions end (but `keepSession`). */
  async store(tx: Db, userId: number, hash: string, keepSession?: number): Promise<void> {
    if (!(await db.setPasswordHash(tx, userId, hash))) throw ApiError.notFound('user');
    await db.deletePasswordLinks(tx, userId);
    await this.onChange(tx, userId, keepSession);
  }

  /** The user's own change: the current password must match when one is set (403 otherwise). */
  async change(userId: number, current: string, next: string, keepSession?: number): Promise<void> {
    const row = await db.passwordById(this.em(), userId);
    if (row === undefined) throw ApiError.notFound('user');
    if (row.passwordHash !== null && !(await verifyPassword(current, row.passwordHash))) {
      throw ApiError.forbidden('the current password is not right');
    }
    await this.set(userId, next, keepSession);
  }

  /** The user `login` (username or e-mail) names whose password is `password`; undefined otherwise. */
  async signIn(login: string, password: string): Promise<AuthUser | undefined> {
    const rows = login === '' ? [] : await db.passwordsByLogin(this.em(), login);
    // always one verification at least: the time taken does not tell whether the login exists
    for (const r of rows.length === 0 ? [undefined] : rows) {
      if (await verifyPassword(password, r?.passwordHash)) {
        return r === undefined ? undefined : { id: r.id, username: r.username, isAdmin: r.isAdmin };
      }
    }
    return undefined;
  }

  /** A one-time link's secret: whoever holds it may set the user's password once, within `ttlMs`. */
  async createLink(userId: number, ttlMs: number): Promise<string> {
    const token = newTokenValue('triad_pw_');
    await db.insertPasswordLink(this.em(), userId, hashToken(token), new Date(Date.now() + ttlMs));
    return token;
  }

  /** The user a link is for while it is valid (its page shows the username), else undefined. */
  async linkUser(token: string): Promise<AuthUser | undefined> {
    const id = await db.passwordLink(this.em(), hashToken(token), false);
    return id === undefined ? undefined : this.authUser(id);
  }

  /** Sets the password through a link, which is used up (404 when it is unknown, used or expired). */
  async useLink(token: string, password: string): Promise<AuthUser> {
    // a link is looked up before any hashing: a made-up link costs a query, never an argon2 run
    const gone = () => new ApiError(404, 'not_found', 'this link is unknown, used or expired');
    if ((await db.passwordLink(this.em(), hashToken(token), false)) === undefined) throw gone();
    const hash = await this.hash(password);
    const userId = await this.em().transactional(async (tx) => {
      const id = await db.passwordLink(tx, hashToken(token), true);
      if (id === undefined) throw gone();
      await this.store(tx, id, hash);
      return id;
    });
    return this.authUser(userId);
  }

  private async authUser(id: number): Promise<AuthUser> {
    const r = await db.passwordById(this.em(), id);
    if (r === undefined) throw ApiError.notFound('user');
    return { id: r.id, username: r.username, isAdmin: r.isAdmin };
  }
}
