import { Migration } from '@mikro-orm/migrations';

/**
 * Live pipeline pages and step logs: every change of a pipeline or of one of its steps (a status,
 * an exit code, a log append raising `log_size`) notifies the channel `triad_pipeline_changes`
 * with the pipeline's id, at commit. Servers listen on it (the CI waker) and wake the pages and
 * log streams watching that pipeline, whichever path made the change (agents, cancel, reaper).
 */
export class Migration0018PipelineNotify extends Migration {
  override name = '0018-pipeline-notify';

  override up(): void {
    for (const [table, id] of [
      ['pipelines', 'id'],
      ['pipeline_steps', 'pipeline_id'],
    ] as const) {
      this.addSql(`
        create function ${table}_changes_notify() returns trigger language plpgsql as $$
        begin
          perform pg_notify('triad_pipeline_changes', new.${id}::text);
          return null;
        end
        $$`);
      this.addSql(`
        create trigger ${table}_changes_notify after update on ${table}
          for each row execute function ${table}_changes_notify()`);
    }
  }

  override down(): void {
    for (const table of ['pipelines', 'pipeline_steps']) {
      this.addSql(`drop trigger ${table}_changes_notify on ${table}`);
      this.addSql(`drop function ${table}_changes_notify()`);
    }
  }
}
