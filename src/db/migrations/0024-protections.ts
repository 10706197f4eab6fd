import { Migration } from '@mikro-orm/migrations';

/**
 * Protected refs: per-repository rules on branch and bookmark names (a glob pattern), with who
 * may push, fast-forward only, deletion, and the checks a merge into them needs.
 */
export class Migration0024Protections extends Migration {
  override name = '0024-protections';

  override up(): void {
    this.addSql(`
      create table ref_protections (
        id serial primary key,
        repo_id int not null references repos(id) on delete cascade,
        pattern text not null,
        fast_forward_only boolean not null default false,
        allow_deletion boolean not null default false,
        push jsonb not null default '"members"',
        require_pipeline boolean not null default false,
        required_contexts text[] not null default '{}',
        created_at timestamptz not null default now(),
        constraint ref_protections_pattern unique (repo_id, pattern)
      )`);
  }

  override down(): void {
    this.addSql('drop table ref_protections');
  }
}
