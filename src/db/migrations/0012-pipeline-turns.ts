import { Migration } from '@mikro-orm/migrations';

/**
 * Claims take turns between organizations: each pipeline records its repository's organization
 * (set at insert, filled here for existing rows), and `ci_org_turns` keeps when each organization
 * last had a pipeline claimed. A claim takes the waiting pipeline of the organization with the
 * fewest running pipelines, then the one served longest ago, then the oldest pipeline.
 */
export class Migration0012PipelineTurns extends Migration {
  override name = '0012-pipeline-turns';

  override up(): void {
    this.addSql(`alter table pipelines add column org_id integer`);
    this.addSql(`update pipelines p set org_id = r.org_id from repos r where r.id = p.repo_id`);
    this.addSql(`alter table pipelines alter column org_id set not null`);
    this.addSql(`create index pipelines_running_org_idx on pipelines (org_id) where status = 'running'`);
    this.addSql(`
      create table ci_org_turns (
        org_id integer primary key references orgs(id) on delete cascade,
        last_claimed_at timestamptz not null
      )`);
  }
}
