import { Migration } from '@mikro-orm/migrations';

/**
 * Per-step resources: a step's `resources: {cpu, memory}` from the pipeline file (Kubernetes
 * quantities as written), handed to the agent with the job; null when the step asks for none.
 */
export class Migration0021StepResources extends Migration {
  override name = '0021-step-resources';

  override up(): void {
    this.addSql(`alter table pipeline_steps add column resources jsonb`);
  }

  override down(): void {
    this.addSql('alter table pipeline_steps drop column resources');
  }
}
