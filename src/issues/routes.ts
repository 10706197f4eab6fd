import { z } from 'zod';
import { reply, respond, type Api } from '../http/api.ts';
import { pathInt, pathText } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import {
  addLabelBody,
  assigneeRef,
  catalogLabelSchema,
  commentBody,
  commentSchema,
  createIssueBody,
  createLabelBody,
  issueSchema,
  listIssuesQuery,
  updateIssueBody,
} from './schemas.ts';
import type { IssuesService } from './service.ts';
import {
  earlierCatalogLabelShape,
  earlierCatalogShape,
  earlierCreateIssueBody,
  earlierIssueShape,
  earlierListIssuesQuery,
  earlierUpdateIssueBody,
} from './earlier.ts';

const WRITE_403 = 'the token lacks issues:write or does not reach the repository';
const READ_403 = 'a private repository and the token lacks issues:read or does not reach it';
const ENRICHED = 'the enriched issue (labels, assignees, severity)';

const READ = { scope: 'issues:read' } as const;
const WRITE = { scope: 'issues:write' } as const;
const NUMBER = { number: pathInt };
/** The earlier variant answers issues without severity and assignees, labels only when assigned. */
const EARLIER_ISSUE = { returns: earlierIssueShape };

export function issueRoutes(api: Api, issues: IssuesService): void {
  const base = '/issues';
  const { labels, reads, writes } = issues;

  api.repoRoute({
    method: 'get',
    path: base,
    repo: READ,
    tag: 'issues',
    auth: 'public',
    summary:
      'Issues, filtered (state default open; new, open, closed, active, all; severity, label, assignee, author, q) and sorted (newest, oldest, updated, comments)',
    operationId: 'listIssues',
    query: listIssuesQuery,
    returns: respond.list(issueSchema, 'issues (without comments)'),
    earlier: {
      summary: 'Issues by state (default open; new, open, closed), newest first',
      query: earlierListIssuesQuery,
      returns: earlierIssueShape,
    },
    errors: { 403: READ_403 },
    handler: async ({ target, query }) => reply.list(await reads.list(target, query)),
  });
  // Registered before `/issues/:number` so `labels` is never taken for an issue number.
  api.repoRoute({
    method: 'get',
    path: `${base}/labels`,
    repo: READ,
    tag: 'issues',
    auth: 'public',
    summary: 'The merged label catalog of the repository (admin, org and repo labels; most specific wins)',
    operationId: 'listRepoLabelCatalog',
    returns: respond.data(z.array(catalogLabelSchema), 'labels by name'),
    earlier: { returns: earlierCatalogShape },
    errors: { 403: READ_403 },
    handler: async ({ target }) => reply.ok(await labels.catalog(target)),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:number`,
    repo: READ,
    params: NUMBER,
    tag: 'issues',
    auth: 'public',
    summary: 'An issue, with `comments` when it has any',
    operationId: 'getIssue',
    returns: respond.data(issueSchema, 'the issue'),
    earlier: EARLIER_ISSUE,
    errors: { 403: READ_403, 404: 'no such repository or issue' },
    handler: async ({ target, params }) => reply.ok(await reads.detail(target, params.number)),
  });
  api.repoRoute({
    repo: WRITE,
    method: 'post',
    path: base,
    tag: 'issues',
    auth: 'token',
    summary: 'Create an issue (issues:write); `new`, or `open` when created with assignees',
    operationId: 'createIssue',
    body: createIssueBody,
    returns: respond.created(issueSchema, ENRICHED, (i, p) =>
      apiPath('repos', p.org!, p.repo!, 'issues', i.number),
    ),
    earlier: {
      summary: 'Create an issue (write): `{title, body}`; it is `new` until the state update opens it',
      body: earlierCreateIssueBody,
      returns: earlierIssueShape,
    },
    errors: {
      400: 'invalid body: bad severity, repeated labels or assignees, assignee cap exceeded (`validation_failed`)',
      403: WRITE_403,
      404: 'no such repository, label, or assignee among the org members',
      409: 'an assignee `display_name` matches several members',
    },
    links: Object.fromEntries(
      ['getIssue', 'updateIssue', 'createComment'].map((id) => [
        id,
        { org: '$request.path.org', repo: '$request.path.repo', number: '$response.body#/data/number' },
      ]),
    ),
    handler: async ({ access, target, body }) =>
      reply.created(await writes.create(target, access.actor(), body)),
  });
  api.repoRoute({
    repo: WRITE,
    params: NUMBER,
    method: 'patch',
    path: `${base}/:number`,
    tag: 'issues',
    auth: 'token',
    summary:
      'Update an issue (issues:write); title, body and state only by the author or an org owner, severity by anyone',
    operationId: 'updateIssue',
    body: updateIssueBody,
    returns: respond.data(issueSchema, 'the updated issue'),
    earlier: {
      summary:
        'Update an issue (write): title, body, state, by the author or an org owner; `state: "open"` triages a `new` issue',
      body: earlierUpdateIssueBody,
      returns: earlierIssueShape,
    },
    errors: { 403: `${WRITE_403}, or title, body or state changed by neither the author nor an org owner` },
    // The author or an org owner may change title, body and state: the service decides from the role.
    handler: async ({ access, target, params, body }) =>
      reply.ok(await writes.update(target, await access.actorIn(target.org.id), params.number, body)),
  });
  api.repoRoute({
    method: 'post',
    path: `${base}/:number/comments`,
    repo: WRITE,
    params: NUMBER,
    tag: 'issues',
    auth: 'token',
    summary: 'Comment on an issue (issues:write); the first comment opens a `new` issue',
    operationId: 'createComment',
    body: commentBody,
    returns: respond.created(commentSchema, 'the new comment'),
    earlier: { summary: 'Comment on an issue (write); the issue keeps its state' },
    errors: { 403: WRITE_403 },
    handler: async ({ access, target, params, body, variant }) =>
      reply.created(
        await writes.comment(target, access.actor(), params.number, body.body, {
          opens: variant === 'current',
        }),
      ),
  });
  api.repoRoute({
    repo: WRITE,
    params: NUMBER,
    method: 'post',
    path: `${base}/:number/labels`,
    tag: 'issues',
    auth: 'token',
    summary: 'Add a label from the merged catalog (issues:write); returns the enriched issue',
    operationId: 'addIssueLabel',
    earlier: 'absent',
    body: addLabelBody,
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository, issue or label' },
    handler: async ({ target, params, body }) =>
      reply.ok(await writes.addLabel(target, params.number, body.name)),
  });
  api.repoRoute({
    method: 'delete',
    path: `${base}/:number/labels/:name`,
    repo: WRITE,
    params: { number: pathInt, name: pathText },
    tag: 'issues',
    auth: 'token',
    summary: 'Remove a label by (URL-encoded) name (issues:write); returns the enriched issue',
    operationId: 'removeIssueLabel',
    earlier: 'absent',
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository or issue, or the issue has no such label' },
    handler: async ({ target, params }) =>
      reply.ok(await writes.removeLabel(target, params.number, params.name)),
  });
  api.repoRoute({
    method: 'post',
    path: `${base}/:number/assignees`,
    repo: WRITE,
    params: NUMBER,
    tag: 'issues',
    auth: 'token',
    summary:
      'Assign an org member by user_id, username or display_name (issues:write); the first assignee opens a `new` issue',
    operationId: 'addIssueAssignee',
    earlier: 'absent',
    body: assigneeRef,
    returns: respond.data(issueSchema, ENRICHED),
    errors: {
      400: 'invalid body, user_id, username and display_name naming different members, or the assignee cap exceeded',
      403: WRITE_403,
      404: 'no such repository or issue, or the assignee is not an org member',
      409: '`display_name` matches several members',
    },
    handler: async ({ target, params, body }) =>
      reply.ok(await writes.addAssignee(target, params.number, body)),
  });
  api.repoRoute({
    method: 'delete',
    path: `${base}/:number/assignees/:id`,
    repo: WRITE,
    params: { number: pathInt, id: pathInt },
    tag: 'issues',
    auth: 'token',
    summary: 'Unassign a user by id (issues:write); returns the enriched issue',
    operationId: 'removeIssueAssignee',
    earlier: 'absent',
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository or issue, or the user is not assigned' },
    handler: async ({ target, params }) =>
      reply.ok(await writes.removeAssignee(target, params.number, params.id)),
  });

  // The label catalog.
  api.route({
    method: 'post',
    path: '/api/v1/admin/labels',
    tag: 'labels',
    auth: 'admin',
    summary: 'Create a site-wide (admin scope) label',
    operationId: 'createSiteLabel',
    earlier: { returns: earlierCatalogLabelShape },
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: { 409: 'a site label of this name exists' },
    handler: async ({ body }) => reply.created(await labels.create({ scope: 'admin' }, body)),
  });
  api.orgRoute({
    org: { scope: 'issues:write', role: 'owner' },
    method: 'post',
    path: '/labels',
    tag: 'labels',
    auth: 'token',
    summary: 'Create an organization label (org owner, issues:write)',
    operationId: 'createOrgLabel',
    earlier: { returns: earlierCatalogLabelShape },
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: {
      403: 'not an owner of the organization, or the token lacks issues:write or reach',
      409: 'an organization label of this name exists',
    },
    handler: async ({ org, body }) =>
      reply.created(await labels.create({ scope: 'org', orgId: org.id }, body)),
  });
  api.repoRoute({
    repo: { scope: 'issues:write', role: 'owner' },
    method: 'post',
    path: '/labels',
    tag: 'labels',
    auth: 'token',
    summary: 'Create a repository label (org owner, issues:write)',
    operationId: 'createRepoLabel',
    earlier: { returns: earlierCatalogLabelShape },
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: {
      403: 'not an owner of the organization, or the token lacks issues:write or reach',
      409: 'a repository label of this name exists',
    },
    handler: async ({ target, body }) =>
      reply.created(await labels.create({ scope: 'repo', repoId: target.repo.id }, body)),
  });
}
