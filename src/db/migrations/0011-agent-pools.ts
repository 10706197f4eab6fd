import { Migration } from '@mikro-orm/migrations';

/**
 * Agent pools: labels route pipelines to the agents that poll with the same labels, and the queue
 * figures wake their watchers.
 *
 * - `pipelines.labels`: the pipeline file's top-level `labels` map (`{}` when none). An agent
 *   claims a pending pipeline whose labels equal the labels it polls with; the pending index
 *   leads with them so a claim and the per-pool figures stay index scans.
 * - `agent_instances.labels`: the labels an instance last polled with (per-pool agent counts).
 * - `triad_pipelines_changed`: every insert, status change and delete of a pipeline notifies the
 *   queue channel (deduplicated per transaction by PostgreSQL), so the long polls of agents and of
 *   queue watchers (`GET /api/v1/ci/queue?wait=`) wake on finishes and cancels as well as on
 *   new work, whatever code path made the change.
 */
export class Migration0011AgentPools extends Migration {
  override name = '0011-agent-pools';

  override up(): void {
    this.addSql(`alter table pipelines add column labels jsonb not null default '{}'`);
    this.addSql(`alter table agent_instances add column labels jsonb not null default '{}'`);
    this.addSql(`drop index pipelines_pending_idx`);
    this.addSql(`create index pipelines_pending_idx on pipelines (labels, id) where status = 'pending'`);
    this.addSql(
      `create index pipelines_active_labels_idx on pipelines (labels) where status in ('pending', 'running')`,
    );
    this.addSql(`
      create function triad_pipelines_changed() returns trigger language plpgsql as $$
      begin
        perform pg_notify('triad_pipelines', '');
        return null;
      end $$`);
    this.addSql(`
      create trigger pipelines_changed after insert or delete or update of status on pipelines
        for each row execute function triad_pipelines_changed()`);
  }
}
