import { first, one, Prepared, type Db } from '../db/query.ts';

/** The queries of web sessions (table `web_sessions`). */

/** A session with its user, as a page request resolves it. */
export type SessionRow = {
  id: number;
  userId: number;
  username: string;
  isAdmin: boolean;
  formToken: string;
  userAgent: string;
  address: string;
  createdAt: Date | string;
  lastSeenAt: Date | string;
  expiresAt: Date | string;
  /** Idle past the idle lifetime the lookup was given. */
  idle: boolean;
  /** `last_seen_at` is older than the lookup's `touchSeconds` (worth recording again). */
  stale: boolean;
};

const COLUMNS = `s.id, s.user_id as "userId", u.username, u.is_admin as "isAdmin", s.form_token as "formToken",
  s.user_agent as "userAgent", s.address, s.created_at as "createdAt", s.last_seen_at as "lastSeenAt",
  s.expires_at as "expiresAt"`;

const BY_HASH = new Prepared<SessionRow>(
  'web_session',
  `select ${COLUMNS}, s.last_seen_at < now() - make_interval(secs => ?::double precision) as idle,
          s.last_seen_at < now() - make_interval(secs => ?::double precision) as stale
     from web_sessions s join users u on u.id = s.user_id
    where s.id_hash = ? and s.expires_at > now()`,
);

/**
 * The unexpired session whose cookie id hashes to `hash`, with whether it is idle past
 * `idleSeconds` and whether its last use is older than `touchSeconds` (worth recording again).
 */
export function byHash(
  db: Db,
  hash: string,
  idleSeconds: number,
  touchSeconds: number,
): Promise<SessionRow | undefined> {
  return BY_HASH.first(db, [idleSeconds, touchSeconds, hash]);
}

export type NewSession = {
  userId: number;
  idHash: string;
  formToken: string;
  userAgent: string;
  address: string;
  expiresAt: Date;
};

export async function insert(db: Db, s: NewSession): Promise<number> {
  const row = await one<{ id: number }>(
    db,
    `insert into web_sessions (user_id, id_hash, form_token, user_agent, address, expires_at)
     values (?, ?, ?, ?, ?, ?) returning id`,
    [s.userId, s.idHash, s.formToken, s.userAgent, s.address, s.expiresAt],
  );
  return row.id;
}

export async function touch(db: Db, id: number): Promise<void> {
  await db.execute('update web_sessions set last_seen_at = now() where id = ?', [id]);
}

/** Gives the session a new cookie id (its hash), keeping everything else. */
export async function rehash(db: Db, id: number, idHash: string): Promise<void> {
  await db.execute('update web_sessions set id_hash = ?, last_seen_at = now() where id = ?', [idHash, id]);
}

/** Deletes one session of the user; false when the user has none of that id. */
export async function remove(db: Db, userId: number, id: number): Promise<boolean> {
  const rows = await db.execute('delete from web_sessions where id = ? and user_id = ? returning id', [
    id,
    userId,
  ]);
  return rows.length > 0;
}

export async function removeByHash(db: Db, idHash: string): Promise<void> {
  await db.execute('delete from web_sessions where id_hash = ?', [idHash]);
}

/** Ends every session of the user, but `except` when given. */
export async function removeAll(db: Db, userId: number, except: number | undefined): Promise<void> {
  await db.execute('delete from web_sessions where user_id = ? and id <> ?', [userId, except ?? 0]);
}

/** Sessions past either lifetime (a few at a time, by the sign-in that finds them). */
export async function removeExpired(db: Db, idleSeconds: number): Promise<void> {
  await db.execute(
    `delete from web_sessions where id in (
       select id from web_sessions
        where expires_at <= now() or last_seen_at < now() - make_interval(secs => ?::double precision)
        limit 1000)`,
    [idleSeconds],
  );
}

/** The user's live sessions, most recently seen first. */
export function forUser(db: Db, userId: number, idleSeconds: number): Promise<SessionRow[]> {
  return db.execute<SessionRow[]>(
    `select ${COLUMNS}, false as idle, false as stale
       from web_sessions s join users u on u.id = s.user_id
      where s.user_id = ? and s.expires_at > now()
        and s.last_seen_at >= now() - make_interval(secs => ?::double precision)
      order by s.last_seen_at desc, s.id desc`,
    [userId, idleSeconds],
  );
}

export function byId(db: Db, id: number): Promise<SessionRow | undefined> {
  return first<SessionRow>(
    db,
    `select ${COLUMNS}, false as idle, false as stale from web_sessions s join users u on u.id = s.user_id
      where s.id = ?`,
    [id],
  );
}
