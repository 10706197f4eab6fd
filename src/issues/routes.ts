import { z } from 'zod';
import { reply, respond, type Api } from '../http/api.ts';
import { apiPath } from '../http/responses.ts';
import { catalogLabelSchema, commentSchema, issueSchema } from './schemas.ts';
import {
  addLabelBody,
  assigneeRef,
  commentBody,
  createIssueBody,
  createLabelBody,
  listIssuesQuery,
  updateIssueBody,
  type IssuesService,
} from './service.ts';

const WRITE_403 = 'the token lacks issues:write or does not reach the repository';
const READ_403 = 'a private repository and the token lacks issues:read or does not reach it';
const ENRICHED = 'the enriched issue (labels, assignees, severity)';

/** A path number: digits only (anything else names no issue and is a 404 in the service). */
const num = (raw: string | undefined): number =>
  raw !== undefined && /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;

export function issueRoutes(api: Api, issues: IssuesService): void {
  const base = '/api/v1/repos/:org/:repo/issues';
  const repoOf = (params: Record<string, string>) => [params.org ?? '', params.repo ?? ''] as const;

  api.route({
    method: 'get',
    path: base,
    tag: 'issues',
    auth: 'public',
    summary:
      'Issues, filtered (state default open; new, open, closed, active, all; severity, label, assignee, author, q) and sorted (newest, oldest, updated, comments)',
    operationId: 'listIssues',
    query: listIssuesQuery,
    returns: respond.list(issueSchema, 'issues (without comments)'),
    errors: { 403: READ_403 },
    handler: async ({ access, params, query }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:read' });
      return reply.list(await issues.list(t, query));
    },
  });
  // Registered before `/issues/:number` so `labels` is never taken for an issue number.
  api.route({
    method: 'get',
    path: `${base}/labels`,
    tag: 'issues',
    auth: 'public',
    summary: 'The merged label catalog of the repository (admin, org and repo labels; most specific wins)',
    operationId: 'listRepoLabelCatalog',
    returns: respond.data(z.array(catalogLabelSchema), 'labels by name'),
    errors: { 403: READ_403 },
    handler: async ({ access, params }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:read' });
      return reply.ok(await issues.catalog(t));
    },
  });
  api.route({
    method: 'get',
    path: `${base}/:number`,
    tag: 'issues',
    auth: 'public',
    summary: 'An issue, with `comments` when it has any',
    operationId: 'getIssue',
    returns: respond.data(issueSchema, 'the issue'),
    errors: { 403: READ_403, 404: 'no such repository or issue' },
    handler: async ({ access, params }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:read' });
      return reply.ok(await issues.detail(t, num(params.number)));
    },
  });
  api.route({
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
    handler: async ({ access, params, body }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.created(await issues.create(t, access, body));
    },
  });
  api.route({
    method: 'patch',
    path: `${base}/:number`,
    tag: 'issues',
    auth: 'token',
    summary:
      'Update an issue (issues:write); title, body and state only by the author or an org owner, severity by anyone',
    operationId: 'updateIssue',
    body: updateIssueBody,
    returns: respond.data(issueSchema, 'the updated issue'),
    errors: { 403: `${WRITE_403}, or title, body or state changed by neither the author nor an org owner` },
    handler: async ({ access, params, body }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.ok(await issues.update(t, access, num(params.number), body));
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:number/comments`,
    tag: 'issues',
    auth: 'token',
    summary: 'Comment on an issue (issues:write); the first comment opens a `new` issue',
    operationId: 'createComment',
    body: commentBody,
    returns: respond.created(commentSchema, 'the new comment'),
    errors: { 403: WRITE_403 },
    handler: async ({ access, params, body }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.created(await issues.comment(t, access, num(params.number), body.body));
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:number/labels`,
    tag: 'issues',
    auth: 'token',
    summary: 'Add a label from the merged catalog (issues:write); returns the enriched issue',
    operationId: 'addIssueLabel',
    body: addLabelBody,
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository, issue or label' },
    handler: async ({ access, params, body }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.ok(await issues.addLabel(t, access, num(params.number), body.name));
    },
  });
  api.route({
    method: 'delete',
    path: `${base}/:number/labels/:name`,
    tag: 'issues',
    auth: 'token',
    summary: 'Remove a label by (URL-encoded) name (issues:write); returns the enriched issue',
    operationId: 'removeIssueLabel',
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository or issue, or the issue has no such label' },
    handler: async ({ access, params }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.ok(await issues.removeLabel(t, access, num(params.number), params.name ?? ''));
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:number/assignees`,
    tag: 'issues',
    auth: 'token',
    summary:
      'Assign an org member by user_id and/or display_name (issues:write); the first assignee opens a `new` issue',
    operationId: 'addIssueAssignee',
    body: assigneeRef,
    returns: respond.data(issueSchema, ENRICHED),
    errors: {
      400: 'invalid body, user_id and display_name naming different members, or the assignee cap exceeded',
      403: WRITE_403,
      404: 'no such repository or issue, or the assignee is not an org member',
      409: '`display_name` matches several members',
    },
    handler: async ({ access, params, body }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.ok(await issues.addAssignee(t, access, num(params.number), body));
    },
  });
  api.route({
    method: 'delete',
    path: `${base}/:number/assignees/:id`,
    tag: 'issues',
    auth: 'token',
    summary: 'Unassign a user by id (issues:write); returns the enriched issue',
    operationId: 'removeIssueAssignee',
    returns: respond.data(issueSchema, ENRICHED),
    errors: { 403: WRITE_403, 404: 'no such repository or issue, or the user is not assigned' },
    handler: async ({ access, params }) => {
      const t = await access.repo(...repoOf(params), { scope: 'issues:write' });
      return reply.ok(await issues.removeAssignee(t, access, num(params.number), num(params.id)));
    },
  });

  // The label catalog (DESIGN.md section 5).
  api.route({
    method: 'post',
    path: '/api/v1/admin/labels',
    tag: 'labels',
    auth: 'admin',
    summary: 'Create a site-wide (admin scope) label',
    operationId: 'createSiteLabel',
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: { 409: 'a site label of this name exists' },
    handler: async ({ access, body }) => {
      access.admin();
      return reply.created(await issues.createLabel('admin', {}, body));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/orgs/:org/labels',
    tag: 'labels',
    auth: 'token',
    summary: 'Create an organization label (org owner, issues:write)',
    operationId: 'createOrgLabel',
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: {
      403: 'not an owner of the organization, or the token lacks issues:write or reach',
      409: 'an organization label of this name exists',
    },
    handler: async ({ access, params, body }) => {
      const org = await access.org(params.org ?? '', { scope: 'issues:write', role: 'owner' });
      return reply.created(await issues.createLabel('org', { orgId: org.id }, body));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/repos/:org/:repo/labels',
    tag: 'labels',
    auth: 'token',
    summary: 'Create a repository label (org owner, issues:write)',
    operationId: 'createRepoLabel',
    body: createLabelBody,
    returns: respond.created(catalogLabelSchema, 'the new label'),
    errors: {
      403: 'not an owner of the organization, or the token lacks issues:write or reach',
      409: 'a repository label of this name exists',
    },
    handler: async ({ access, params, body }) => {
      const { repo } = await access.repo(...repoOf(params), { scope: 'issues:write', role: 'owner' });
      return reply.created(await issues.createLabel('repo', { repoId: repo.id }, body));
    },
  });
}
