import type { EntityManager } from '@mikro-orm/postgresql';
import { ALL_SCOPES, hashToken, newTokenValue } from '../domain/access.ts';
import type { Db } from '../db/query.ts';
import * as db from './repository.ts';
import type { UserRow } from './repository.ts';

/** The scopes of the operator's bootstrap token (TRIAD_OPERATOR_TOKEN): the agent administration only. */
const OPERATOR_SCOPES = ['agents:admin'];

/** `plaintext` is a personal, never-expiring token of `userId` with exactly `OPERATOR_SCOPES`. */
async function ensureOperatorToken(tx: Db, userId: number, plaintext: string): Promise<void> {
  const hash = hashToken(plaintext);
  const existing = await db.tokenByHash(tx, hash);
  if (existing !== undefined && existing.userId !== userId) {
    throw new Error('TRIAD_OPERATOR_TOKEN is already a token of another user');
  }
  if (existing === undefined) {
    await db.insertToken(tx, {
      userId,
      name: 'bootstrap (TRIAD_OPERATOR_TOKEN)',
      hash,
      scopes: OPERATOR_SCOPES,
      level: 'personal',
      targetOrgId: null,
      targetRepoId: null,
      expiresAt: null,
    });
  } else {
    // also narrows a token that had more (say TRIAD_ADMIN_TOKEN's value before)
    await db.widenToken(tx, existing.id, OPERATOR_SCOPES);
  }
}

/** How long the first administrator's password link is valid. */
const FIRST_LINK_MS = 7 * 86_400_000;

/** The administrator a server starts with: the configured one (`TRIAD_ADMIN_*`), or the first start's. */
export class AdminBootstrap {
  private readonly em: () => EntityManager;

  constructor(em: () => EntityManager) {
    this.em = em;
  }

  /**
   * Bootstrap: the admin user exists (created or promoted) and, when a token is given, that
   * plaintext is a valid personal token of it with every scope; an `operatorToken`, one with only
   * `agents:admin` (TRIAD_OPERATOR_TOKEN: what the AgentPool operator uses).
   */
  async ensureAdmin(admin: {
    username: string;
    email: string;
    token: string | undefined;
    operatorToken?: string | undefined;
  }): Promise<UserRow> {
    if (admin.operatorToken !== undefined && admin.operatorToken === admin.token) {
      throw new Error('TRIAD_OPERATOR_TOKEN must differ from TRIAD_ADMIN_TOKEN');
    }
    return this.em().transactional(async (tx) => {
      await db.lockAdminBootstrap(tx);
      let user = await db.userByName(tx, admin.username);
      if (user === undefined) {
        user = await db.insertUser(tx, {
          username: admin.username,
          email: admin.email,
          displayName: admin.username,
          isAdmin: true,
        });
      } else if (!user.isAdmin) {
        await db.makeAdmin(tx, user.id);
        user = { ...user, isAdmin: true };
      }
      if (admin.token !== undefined) {
        const hash = hashToken(admin.token);
        const existing = await db.tokenByHash(tx, hash);
        if (existing !== undefined && existing.userId !== user.id) {
          throw new Error('TRIAD_ADMIN_TOKEN is already a token of another user');
        }
        if (existing === undefined) {
          await db.insertToken(tx, {
            userId: user.id,
            name: 'bootstrap (TRIAD_ADMIN_TOKEN)',
            hash,
            scopes: ALL_SCOPES,
            level: 'personal',
            targetOrgId: null,
            targetRepoId: null,
            expiresAt: null,
          });
        } else {
          await db.widenToken(tx, existing.id, ALL_SCOPES);
        }
      }
      if (admin.operatorToken !== undefined) await ensureOperatorToken(tx, user.id, admin.operatorToken);
      return user;
    });
  }

  /**
   * TRIAD_OPERATOR_TOKEN without a configured administrator: a token with only `agents:admin` of
   * the site administrator made first. It never makes anyone an administrator (a user who merely
   * took the name `admin` stays what they are); on an empty database it is the administrator
   * `admin`; with users but no administrator, the start fails.
   */
  async ensureOperatorToken(plaintext: string): Promise<UserRow> {
    return this.em().transactional(async (tx) => {
      await db.lockAdminBootstrap(tx);
      let admin = await db.oldestAdmin(tx);
      // an empty database (no first start printed an administrator): the administrator `admin`
      if (admin === undefined && !(await db.anyUser(tx)))
        admin = await db.insertUser(tx, {
          username: 'admin',
          email: 'admin@localhost',
          displayName: 'admin',
          isAdmin: true,
        });
      if (admin === undefined)
        throw new Error(
          'TRIAD_OPERATOR_TOKEN needs a site administrator to own it, and there is none: set TRIAD_ADMIN_USERNAME (or TRIAD_ADMIN_TOKEN) too',
        );
      await ensureOperatorToken(tx, admin.id, plaintext);
      return admin;
    });
  }

  /**
   * First start without any user: creates the administrator `username` and a personal token
   * with every scope, returning its plaintext (shown once). Undefined when a user exists already.
   */
  async createFirstAdmin(
    username: string,
    email: string,
  ): Promise<{ user: UserRow; token: string; passwordLink: string } | undefined> {
    return this.em().transactional(async (tx) => {
      await db.lockAdminBootstrap(tx);
      if (await db.anyUser(tx)) return undefined;
      const user = await db.insertUser(tx, { username, email, displayName: username, isAdmin: true });
      const token = newTokenValue();
      await db.insertToken(tx, {
        userId: user.id,
        name: 'first start',
        hash: hashToken(token),
        scopes: ALL_SCOPES,
        level: 'personal',
        targetOrgId: null,
        targetRepoId: null,
        expiresAt: null,
      });
      const link = newTokenValue('triad_pw_');
      await db.insertPasswordLink(tx, user.id, hashToken(link), new Date(Date.now() + FIRST_LINK_MS));
      return { user, token, passwordLink: link };
    });
  }
}
