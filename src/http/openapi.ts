import { z } from 'zod';
import type { Api, AuthKind } from './api.ts';

type JsonSchema = Record<string, unknown>;

const toSchema = (s: z.ZodType): JsonSchema =>
  z.toJSONSchema(s, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' });

const errorSchema: JsonSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' } },
    },
  },
};

const security: Record<AuthKind, unknown[] | undefined> = {
  public: [{}, { bearer: [] }],
  token: [{ bearer: [] }],
  admin: [{ bearer: [] }],
  agent: [{ agentBearer: [] }],
};

/** Builds the OpenAPI 3.0 document from the route table (the zod schemas are the source). */
export function openapiDocument(api: Api, version: string, serverUrl: string): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of api.routes) {
    const oaPath = r.path.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
    const parameters: unknown[] = [...r.path.matchAll(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
      ...(r.path.includes(`*${m[1]}`) ? { description: 'multi-segment path remainder' } : {}),
    }));
    if (r.query !== undefined) {
      const q = toSchema(r.query) as { properties?: Record<string, JsonSchema>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema });
      }
    }
    const status = String(r.status ?? 200);
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: [r.tag],
      operationId: `${r.method}_${oaPath.replace(/[^A-Za-z0-9]+/g, '_').replace(/^_|_$/g, '')}`,
      parameters,
      security: security[r.auth],
      responses: {
        [status]: { description: r.returns ?? (status === '204' ? 'no content' : 'success') },
        default: { description: 'error', content: { 'application/json': { schema: errorSchema } } },
      },
    };
    if (r.body !== undefined) {
      op.requestBody = {
        required: true,
        content: r.rawBody
          ? { 'text/plain': { schema: { type: 'string' } } }
          : { 'application/json': { schema: toSchema(r.body) } },
      };
    }
    (paths[oaPath] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.0.3',
    info: { title: 'Triad API', version },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API token' },
        agentBearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'CI agent token (only under /api/v1/ci/)',
        },
      },
      schemas: { Error: errorSchema },
    },
    paths,
  };
}
