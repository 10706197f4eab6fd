import type { EntityManager } from '@mikro-orm/postgresql';
import type { ContentsService } from '../repos/contents-service.ts';
import type { ReposService } from '../repos/service.ts';
import { LabelCatalog } from './labels.ts';
import { IssuePins } from './pins.ts';
import { IssueReads, type IssueUsers } from './reads.ts';
import { IssueTemplates } from './templates.ts';
import { IssueWrites, type IssueMembers } from './writes.ts';

export type IssuesDeps = {
  em: () => EntityManager;
  /** Assignees and authors are users: looked up through the users service. */
  users: IssueUsers;
  /** Who may be assigned: members of the repository's organization. */
  orgs: IssueMembers;
  /** Most assignees one issue may have (TRIAD_ISSUE_MAX_ASSIGNEES). */
  maxAssignees: number;
  /** Most pinned issues one repository may have (TRIAD_MAX_PINNED_ISSUES). */
  maxPinned: number;
  /** Where issue templates are read: the repository's default branch and its files. */
  repos: Pick<ReposService, 'handle'>;
  contents: Pick<ContentsService, 'commit' | 'tree' | 'blob'>;
};

/**
 * The issue tracker: issues, comments, labels (with the admin/org/repo catalog) and assignees,
 * split by use case: `labels` (the catalog), `reads` (lists and details), `writes` (changes and
 * their events), and the web interface's `pins` and `templates`. Users and memberships come from
 * the users and orgs services, repository files from the contents service.
 */
export class IssuesService {
  readonly labels: LabelCatalog;
  readonly reads: IssueReads;
  readonly writes: IssueWrites;
  readonly pins: IssuePins;
  readonly templates: IssueTemplates;

  constructor(deps: IssuesDeps) {
    this.labels = new LabelCatalog({ em: deps.em });
    this.reads = new IssueReads({ em: deps.em, users: deps.users });
    this.writes = new IssueWrites({ ...deps, labels: this.labels, reads: this.reads });
    this.pins = new IssuePins({ em: deps.em, reads: this.reads, maxPinned: deps.maxPinned });
    this.templates = new IssueTemplates({ repos: deps.repos, contents: deps.contents });
  }
}
