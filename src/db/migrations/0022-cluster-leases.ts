import { Migration } from '@mikro-orm/migrations';

/**
 * Named leases one replica at a time holds for a while (`telemetry/cluster-lease.ts`): the replica
 * that exports the cluster-wide gauges. A row, not a session-level advisory lock, so it works
 * through a transaction-mode pooler and survives none of its holder's connections.
 */
export class Migration0022ClusterLeases extends Migration {
  override name = '0022-cluster-leases';

  override up(): void {
    this.addSql(`
      create table cluster_leases (
        name varchar(64) primary key,
        holder varchar(200) not null,
        expires_at timestamptz not null
      )`);
  }

  override down(): void {
    this.addSql('drop table cluster_leases');
  }
}
