import { Migration } from '@mikro-orm/migrations';

export class Migration0001Foundation extends Migration {
  override name = '0001-foundation';

  override up(): void {
    this.addSql(`
      create table users (
        id serial primary key,
        username varchar(64) not null,
        email varchar(255) not null,
        display_name varchar(255) not null,
        is_admin boolean not null default false,
        avatar_url varchar(1024) not null default '',
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index users_username_key on users (lower(username))`);
    this.addSql(`create index users_display_name_idx on users (lower(display_name))`);
    this.addSql(`
      create table orgs (
        id serial primary key,
        name varchar(64) not null,
        description text not null default '',
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index orgs_name_key on orgs (lower(name))`);
    this.addSql(`
      create table org_members (
        org_id integer not null references orgs(id) on delete cascade,
        user_id integer not null references users(id) on delete cascade,
        role varchar(16) not null check (role in ('owner', 'member')),
        created_at timestamptz not null default now(),
        primary key (org_id, user_id)
      )`);
    this.addSql(`create index org_members_user_idx on org_members (user_id)`);
    this.addSql(`
      create table repos (
        id serial primary key,
        org_id integer not null references orgs(id) on delete cascade,
        name varchar(100) not null,
        description text not null default '',
        is_private boolean not null default false,
        vcs varchar(8) not null check (vcs in ('hg', 'git', 'fossil')),
        default_branch varchar(255) not null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index repos_org_name_key on repos (org_id, lower(name))`);
    this.addSql(`
      create table api_tokens (
        id serial primary key,
        user_id integer not null references users(id) on delete cascade,
        name varchar(255) not null,
        token_hash char(64) not null,
        scopes text[] not null,
        level varchar(16) not null check (level in ('personal', 'org', 'repo')),
        target_org_id integer references orgs(id) on delete cascade,
        target_repo_id integer references repos(id) on delete cascade,
        expires_at timestamptz,
        created_at timestamptz not null default now(),
        last_used_at timestamptz
      )`);
    this.addSql(`create unique index api_tokens_hash_key on api_tokens (token_hash)`);
    this.addSql(`create index api_tokens_user_idx on api_tokens (user_id)`);
  }
}
