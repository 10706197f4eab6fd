import { ApiToken, User } from '../users/entities.ts';
import { Org, OrgMember } from '../orgs/entities.ts';
import { Repo } from '../repos/entities.ts';
import { issueEntities } from '../issues/entities.ts';

/** Every entity known to the ORM. Feature folders own their entities; this is only the registry. */
export const entities = [User, ApiToken, Org, OrgMember, Repo, ...issueEntities];
