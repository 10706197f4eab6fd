import { Migration } from '@mikro-orm/migrations';

/**
 * The web interface: users get an optional password (an argon2id hash in PHC form), sessions
 * keep only a SHA-256 of their cookie's random id (and the form token their pages carry), and
 * one-time links set a password (the first administrator's at the first start).
 */
export class Migration0014Web extends Migration {
  override name = '0014-web';

  override up(): void {
    this.addSql(`alter table users add column password_hash text`);
    this.addSql(`
      create table web_sessions (
        id serial primary key,
        user_id integer not null references users(id) on delete cascade,
        id_hash char(64) not null unique,
        form_token varchar(64) not null,
        user_agent varchar(512) not null default '',
        address varchar(64) not null default '',
        created_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now(),
        expires_at timestamptz not null
      )`);
    this.addSql(`create index web_sessions_user_idx on web_sessions (user_id)`);
    this.addSql(`
      create table password_links (
        id serial primary key,
        user_id integer not null references users(id) on delete cascade,
        token_hash char(64) not null unique,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null
      )`);
    this.addSql(`create index password_links_user_idx on password_links (user_id)`);
  }
}
