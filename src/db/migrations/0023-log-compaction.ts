import { Migration } from '@mikro-orm/migrations';

const FINAL_STEP = `('success', 'failure', 'skipped', 'cancelled')`;
const FINAL_PIPELINE = `('success', 'failure', 'cancelled', 'error')`;

/**
 * Step-log compaction (pipelines/log-compaction.ts): a step whose log is complete gets a row in
 * `step_log_compactions` from triggers, whichever path ended it (an agent's report, a cancel, the
 * reaper) and when a chunk arrives after it ended; the compaction worker replaces the step's
 * chunks by one object and deletes the marker. Objects no row points to any more wait in
 * `log_blob_garbage` until their `delete_after` (readers that started before keep working).
 */
export class Migration0023LogCompaction extends Migration {
  override name = '0023-log-compaction';

  override up(): void {
    this.addSql(`
      create table step_log_compactions (
        step_id integer primary key references pipeline_steps(id) on delete cascade,
        due_at timestamptz not null default now()
      )`);
    this.addSql('create index step_log_compactions_due on step_log_compactions (due_at)');
    this.addSql(`
      create table log_blob_garbage (
        id bigserial primary key,
        step_id integer not null,
        blob_key varchar(255) not null,
        delete_after timestamptz not null
      )`);
    this.addSql('create index log_blob_garbage_due on log_blob_garbage (delete_after)');
    this.addSql(`
      create function step_log_compaction_mark() returns trigger language plpgsql as $$
      begin
        if tg_table_name = 'pipelines' then
          insert into step_log_compactions (step_id)
            select id from pipeline_steps where pipeline_id = new.id and log_size > 0
            on conflict do nothing;
        elsif tg_table_name = 'pipeline_steps' then
          insert into step_log_compactions (step_id) values (new.id) on conflict do nothing;
        elsif exists (select 1 from pipeline_steps s join pipelines p on p.id = s.pipeline_id
                       where s.id = new.step_id
                         and (s.status in ${FINAL_STEP} or p.status in ${FINAL_PIPELINE})) then
          -- a chunk stored after its step ended (an agent still shipping a cancelled step's tail)
          insert into step_log_compactions (step_id) values (new.step_id) on conflict do nothing;
        end if;
        return null;
      end
      $$`);
    this.addSql(`
      create trigger step_log_compaction_step after update of status on pipeline_steps for each row
        when (new.status in ${FINAL_STEP} and old.status not in ${FINAL_STEP})
        execute function step_log_compaction_mark()`);
    this.addSql(`
      create trigger step_log_compaction_pipeline after update of status on pipelines for each row
        when (new.status in ${FINAL_PIPELINE} and old.status not in ${FINAL_PIPELINE})
        execute function step_log_compaction_mark()`);
    this.addSql(`
      create trigger step_log_compaction_chunk after insert on step_log_chunks for each row
        when (new."offset" > 0)
        execute function step_log_compaction_mark()`);
  }

  override down(): void {
    this.addSql('drop trigger step_log_compaction_chunk on step_log_chunks');
    this.addSql('drop trigger step_log_compaction_pipeline on pipelines');
    this.addSql('drop trigger step_log_compaction_step on pipeline_steps');
    this.addSql('drop function step_log_compaction_mark()');
    this.addSql('drop table log_blob_garbage');
    this.addSql('drop table step_log_compactions');
  }
}
