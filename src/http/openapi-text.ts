import type { ApiVariant } from '../domain/variant.ts';

/** The texts of the OpenAPI document: its tags and its description, per API variant. */

export const TAGS: Record<string, string> = {
  ops: 'health, readiness, metrics and this document',
  users: 'the authenticated user and their API tokens',
  admin: 'site administration (site admin, personal token with the admin scope)',
  orgs: 'organizations and their members',
  repos: 'repositories',
  contents: 'repository contents: tree, blob, log, changeset',
  issues: 'issues, comments, labels and assignees',
  labels: 'the label catalog (site, organization and repository labels)',
  pulls: 'pull requests: mergeability on read, merge, comments',
  pipelines: 'CI pipelines, user side',
  statuses: "commit statuses reported by external systems and by Triad's own pipelines (`triad/pipeline`)",
  ci: 'CI agent protocol (agent token)',
  webhooks: 'repository and organization webhooks, their delivery history and redelivery',
  protections:
    'protected branches and bookmarks: who may push, fast-forward only, deletion, checks before a merge',
  search: 'full-text search: repositories, and the issues and pull requests of a repository',
};

export const DESCRIPTION = `Triad REST API. Errors are always \`{"error": {"code", "message"}}\`. Lists answer
\`{data, pagination: {page, per_page, total}}\` with \`Link\` and \`X-Total-Count\` headers (the pipeline
list keeps its own envelope). Authentication: \`Authorization: Bearer <token>\`; a token that is sent
must be valid even on public routes. A known path called with another method answers 405 with
\`Allow\`. Private things the caller may not see answer 404.`;

export const VARIANT_TEXT: Record<ApiVariant, string> = {
  current: `This document describes the **current** API variant. A request is answered in the variant its
\`X-Svc-Api-Variant\` header names, else the one its token pins (\`api_variant\`), else the server's
default; \`?variant=earlier\` gives the earlier variant's document.`,
  earlier: `This document describes the **earlier** API variant (scopes \`read\`, \`write\`, \`admin\`;
changesets and log entries with \`node\`, \`short_node\`, \`rev\`; pull requests with \`source_bookmark\`
and \`target_branch\`; issues without severity or assignees; pipelines without \`tag\`, \`events\`,
\`error_message\`). A request is answered in it when its \`X-Svc-Api-Variant: earlier\` header, its
token's \`api_variant\` or the server's default says so.`,
};
