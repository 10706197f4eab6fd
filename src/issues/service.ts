import type { EntityManager } from '@mikro-orm/postgresql';
import { LabelCatalog } from './labels.ts';
import { IssueReads, type IssueUsers } from './reads.ts';
import { IssueWrites, type IssueMembers } from './writes.ts';

export type IssuesDeps = {
  em: () => EntityManager;
  /** Assignees and authors are users: looked up through the users service. */
  users: IssueUsers;
  /** Who may be assigned: members of the repository's organization. */
  orgs: IssueMembers;
  /** Most assignees one issue may have (TRIAD_ISSUE_MAX_ASSIGNEES). */
  maxAssignees: number;
};

/**
 * The issue tracker: issues, comments, labels (with the admin/org/repo catalog) and assignees,
 * split by use case: `labels` (the catalog), `reads` (lists and details), `writes` (changes and
 * their events). Users and memberships come from the users and orgs services.
 */
export class IssuesService {
  readonly labels: LabelCatalog;
  readonly reads: IssueReads;
  readonly writes: IssueWrites;

  constructor(deps: IssuesDeps) {
    this.labels = new LabelCatalog({ em: deps.em });
    this.reads = new IssueReads({ em: deps.em, users: deps.users });
    this.writes = new IssueWrites({ ...deps, labels: this.labels, reads: this.reads });
  }
}
