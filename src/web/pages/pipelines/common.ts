import type { Logger } from 'pino';
import type { PipelinesService } from '../../../pipelines/service.ts';
import type { ReposService } from '../../../repos/service.ts';
import type { RepoPage } from '../../repo-page.ts';

export type PipelineDeps = { repos: ReposService; pipelines: PipelinesService; log: Logger };

/** Reading pipelines and logs (as the API's `ci:read`), and acting on them (org members, `ci:write`). */
export const READ = { scope: 'ci:read' } as const;
export const WRITE = { scope: 'ci:write', role: 'member' } as const;

/** Whether the viewer may cancel, rerun and delete (a session holds every scope; the role decides). */
export function canWrite(p: RepoPage): boolean {
  return p.role === 'member' || p.role === 'owner';
}
