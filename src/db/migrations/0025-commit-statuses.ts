import { Migration } from '@mikro-orm/migrations';

/**
 * Commit statuses: what external systems (and Triad's own pipelines, context `triad/pipeline`)
 * report on a commit. One row per report (the history); the state of a context is its newest row.
 */
export class Migration0025CommitStatuses extends Migration {
  override name = '0025-commit-statuses';

  override up(): void {
    this.addSql(`
      create table commit_statuses (
        id serial primary key,
        repo_id int not null references repos(id) on delete cascade,
        commit text not null,
        state text not null check (state in ('pending', 'success', 'failure', 'error')),
        context text not null,
        description text,
        target_url text,
        creator_id int references users(id) on delete set null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql('create index commit_statuses_commit on commit_statuses (repo_id, commit, context, id desc)');
  }

  override down(): void {
    this.addSql('drop table commit_statuses');
  }
}
