import { Migration0001Foundation } from './0001-foundation.ts';
import { Migration0002Outbox } from './0002-outbox.ts';
import { Migration0003Issues } from './0003-issues.ts';
import { Migration0004Pipelines } from './0004-pipelines.ts';
import { Migration0005CiIsolation } from './0005-ci-isolation.ts';
import { Migration0006RepoRefStates } from './0006-repo-ref-states.ts';
import { Migration0008Webhooks } from './0008-webhooks.ts';
import { Migration0009Pulls } from './0009-pulls.ts';
import { Migration0010Releases } from './0010-releases.ts';
import { Migration0011AgentPools } from './0011-agent-pools.ts';
import { Migration0012PipelineTurns } from './0012-pipeline-turns.ts';
import { Migration0013Search } from './0013-search.ts';
import { Migration0014Web } from './0014-web.ts';
import { Migration0015IssuePins } from './0015-issue-pins.ts';
import { Migration0017NumberFloors } from './0017-number-floors.ts';
import { Migration0018PipelineNotify } from './0018-pipeline-notify.ts';
import { Migration0019ApiVariant } from './0019-api-variant.ts';
import { Migration0020StorageNodes } from './0020-storage-nodes.ts';
import { Migration0021StepResources } from './0021-step-resources.ts';
import { Migration0022ClusterLeases } from './0022-cluster-leases.ts';
import { Migration0024Protections } from './0024-protections.ts';
import { Migration0025CommitStatuses } from './0025-commit-statuses.ts';

/** Every committed migration, in order. New migrations are appended here. */
export const migrations = [
  { name: '0001-foundation', class: Migration0001Foundation },
  { name: '0002-outbox', class: Migration0002Outbox },
  { name: '0003-issues', class: Migration0003Issues },
  { name: '0004-pipelines', class: Migration0004Pipelines },
  { name: '0005-ci-isolation', class: Migration0005CiIsolation },
  { name: '0006-repo-ref-states', class: Migration0006RepoRefStates },
  { name: '0008-webhooks', class: Migration0008Webhooks },
  { name: '0009-pulls', class: Migration0009Pulls },
  { name: '0010-releases', class: Migration0010Releases },
  { name: '0011-agent-pools', class: Migration0011AgentPools },
  { name: '0012-pipeline-turns', class: Migration0012PipelineTurns },
  { name: '0013-search', class: Migration0013Search },
  { name: '0014-web', class: Migration0014Web },
  { name: '0015-issue-pins', class: Migration0015IssuePins },
  { name: '0017-number-floors', class: Migration0017NumberFloors },
  { name: '0018-pipeline-notify', class: Migration0018PipelineNotify },
  { name: '0019-api-variant', class: Migration0019ApiVariant },
  { name: '0020-storage-nodes', class: Migration0020StorageNodes },
  { name: '0021-step-resources', class: Migration0021StepResources },
  { name: '0022-cluster-leases', class: Migration0022ClusterLeases },
  { name: '0024-protections', class: Migration0024Protections },
  { name: '0025-commit-statuses', class: Migration0025CommitStatuses },
];
