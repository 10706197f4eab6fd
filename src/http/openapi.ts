import { z } from 'zod';
import type { AnyRoute, Api, AuthKind } from './api.ts';
import { isPathInt } from './params.ts';
import { errorEnvelope } from './errors.ts';
import { listEnvelope, queryIntTarget } from './pagination.ts';
import type { ErrorStatus, HeaderDoc } from './responses.ts';
import { routeIn, VARIANT_HEADER } from './variant.ts';
import type { ApiVariant } from '../domain/variant.ts';
import { DESCRIPTION, TAGS, VARIANT_TEXT } from './openapi-text.ts';

type JsonSchema = Record<string, unknown>;
type Io = 'input' | 'output';
export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
} & JsonSchema;
const REF = '#/components/schemas/';

/**
 * Zod to OpenAPI 3.1 schema objects (JSON Schema 2020-12: a nullable value is an `anyOf` with
 * `{type: 'null'}`, never a `nullable` keyword). Schemas named with `.meta({id})` become
 * `components.schemas` entries referenced by `$ref`, so generated clients get named types.
 */
class Schemas {
  readonly named: Record<string, JsonSchema> = {};

  convert(s: z.ZodType, io: Io): JsonSchema {
    const out = z.toJSONSchema(s, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'any',
      override: (ctx) => {
        // A digits-only query string shows as the integer it is parsed into, with its default.
        const def = ctx.zodSchema._zod.def;
        const inner = def.type === 'default' ? def.innerType : ctx.zodSchema;
        const n = queryIntTarget(inner);
        if (n === undefined) return;
        const json = ctx.jsonSchema as JsonSchema;
        delete json.pattern;
        Object.assign(json, z.toJSONSchema(n, { target: 'draft-2020-12' }));
        delete json.$schema;
        if (def.type === 'default') json.default = def.defaultValue;
      },
    }) as JsonSchema;
    const defs = (out.$defs ?? {}) as Record<string, JsonSchema>;
    delete out.$defs;
    delete out.$schema;
    for (const [id, def] of Object.entries(defs)) {
      const clean = tidy(def, io) as JsonSchema;
      const had = this.named[id];
      if (had !== undefined && JSON.stringify(had) !== JSON.stringify(clean)) {
        throw new Error(`OpenAPI: schema "${id}" differs between its uses`);
      }
      this.named[id] = clean;
    }
    return tidy(out, io) as JsonSchema;
  }
}

/**
 * Points `$ref`s at components. In response schemas, drops the ±2^53 bounds zod gives every
 * integer and `additionalProperties: false` (clients should accept fields added later; the test
 * suite checks the other way that every field sent is documented). In request schemas, a string
 * without its own pattern, format or enum gets one excluding NUL, which the server refuses
 * (PostgreSQL text cannot hold it).
 */
function tidy(v: unknown, io: Io): unknown {
  if (Array.isArray(v)) return v.map((x) => tidy(x, io));
  if (typeof v !== 'object' || v === null) return v;
  const s = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(s)) {
    const safeBound =
      (k === 'minimum' || k === 'maximum') && Math.abs(x as number) === Number.MAX_SAFE_INTEGER;
    if (io === 'output' && (safeBound || (k === 'additionalProperties' && x === false))) continue;
    if (k === '$ref' && typeof x === 'string') out[k] = x.replace('#/$defs/', REF);
    else if (k === 'properties' || k === '$defs') {
      out[k] = Object.fromEntries(Object.entries(x as object).map(([n, p]) => [n, tidy(p, io)]));
    } else if (k === 'enum' || k === 'default' || k === 'required') out[k] = x;
    else out[k] = tidy(x, io);
  }
  const string = s.type === 'string' || (Array.isArray(s.type) && s.type.includes('string'));
  const plainString = string && s.pattern === undefined && s.format === undefined;
  if (io === 'input' && plainString && s.enum === undefined) out.pattern = '^[^\\u0000]*$';
  return out;
}

const security: Record<AuthKind, unknown[]> = {
  public: [{}, { bearer: [] }],
  token: [{ bearer: [] }],
  admin: [{ bearer: [] }],
  'agents-admin': [{ bearer: [] }],
  agent: [{ agentBearer: [] }],
  'agent-or-admin': [{ agentBearer: [] }, { bearer: [] }],
};

const header = (description: string, type: HeaderDoc['type'] = 'string', required = true) => ({
  description,
  required,
  schema: { type },
});
const REQUEST_ID = { $ref: '#/components/headers/X-Request-Id' };
const API_VARIANT = { $ref: `#/components/headers/${VARIANT_HEADER}` };
/** The headers every answer of a route carries: the request id, and under /api/ the API variant. */
const always = (r: AnyRoute): Record<string, unknown> =>
  r.path.startsWith('/api/')
    ? { 'X-Request-Id': REQUEST_ID, [VARIANT_HEADER]: API_VARIANT }
    : { 'X-Request-Id': REQUEST_ID };
const PAGE_HEADERS = {
  Link: header('RFC 8288 links to the first, prev, next and last pages'),
  'X-Total-Count': header('number of items in the whole list', 'integer'),
};

const ERROR_TEXT: Record<ErrorStatus, string> = {
  400: 'bad request (`bad_request`, `validation_failed`)',
  401: 'authentication required, or the token sent is malformed, unknown or expired (`unauthorized`)',
  403: 'the token or caller lacks a needed scope, role or reach (`forbidden`)',
  404: 'nothing of that name exists, or the caller may not see it (`not_found`)',
  405: 'method not allowed on this path (`method_not_allowed`)',
  409: 'conflicts with the current state (`conflict`)',
  413: 'request body too large (`payload_too_large`)',
  415: 'a body that is not `application/json`, or whose encoding or charset is not supported (`unsupported_media_type`)',
  416: 'the one byte range asked for starts past the end (`range_not_satisfiable`; `Content-Range: bytes */size`)',
  422: 'well-formed but cannot be processed (`unprocessable`)',
  429: 'too many requests: retry after `Retry-After` seconds',
  503: 'a dependency is unavailable (`service_unavailable`)',
};

/** Errors a route answers by its kind, before its own `errors`. */
function errorsOf(r: AnyRoute): Map<ErrorStatus, string> {
  const m = new Map<ErrorStatus, string>();
  const api = r.path.startsWith('/api/');
  if (r.body !== undefined && r.rawBody !== true) {
    m.set(400, 'malformed JSON (`bad_request`) or a body that fails validation (`validation_failed`)');
  }
  if (r.query !== undefined)
    m.set(400, `${m.has(400) ? 'bad body or ' : ''}invalid query parameter (\`validation_failed\`)`);
  if (api) {
    const bad = m.get(400);
    m.set(400, `${bad === undefined ? '' : `${bad}; or `}an unknown \`X-Svc-Api-Variant\` (\`bad_request\`)`);
    m.set(
      401,
      r.auth === 'public'
        ? 'the token sent is malformed, unknown or expired (a public route needs none) (`unauthorized`)'
        : r.auth === 'agent' || r.auth === 'agent-or-admin'
          ? 'agent token missing or invalid (`unauthorized`)'
          : 'token missing, malformed, unknown or expired (`unauthorized`)',
    );
  }
  if (r.auth === 'admin') m.set(403, 'not a site administrator using a personal token with the admin scope');
  if (r.auth === 'agents-admin') {
    m.set(403, 'not a site administrator using a personal token with the `agents:admin` or `admin` scope');
  }
  if (/[:*]/.test(r.path)) m.set(404, ERROR_TEXT[404]);
  if (r.body !== undefined) {
    m.set(413, ERROR_TEXT[413]);
    if (r.rawBody !== true) m.set(415, ERROR_TEXT[415]);
  }
  if (api) m.set(429, ERROR_TEXT[429]);
  for (const [k, v] of Object.entries(r.errors ?? {})) m.set(Number(k) as ErrorStatus, v);
  // with storage nodes, anything a repository's route reads may find its node down
  if (api && /\/repos\/:org\/:repo(\/|$)/.test(r.path)) {
    const own = m.get(503);
    m.set(503, `${own === undefined ? '' : `${own}; or `}${STORAGE_UNAVAILABLE}`);
  }
  return m;
}

const STORAGE_UNAVAILABLE =
  "the repository's storage node cannot be reached (`storage_unavailable`, with `Retry-After`)";

function errorResponse(r: AnyRoute, status: ErrorStatus, description: string): unknown {
  const headers: Record<string, unknown> = always(r);
  if (status === 401) headers['WWW-Authenticate'] = header('`Bearer realm="triad"` challenge (RFC 6750)');
  if (status === 429) headers['Retry-After'] = header('seconds to wait before retrying', 'integer');
  // not every 503 says when to come back (a readiness probe's does not)
  if (status === 503) headers['Retry-After'] = header('seconds to wait before retrying', 'integer', false);
  if (status === 416) headers['Content-Range'] = header('`bytes */size`: the size of the whole');
  return { description, headers, content: { 'application/json': { schema: { $ref: `${REF}Error` } } } };
}

/**
 * The content map of a text reply: each of its content types, a string body; bytes (any type but
 * `text/*`) are `format: binary`, so generated clients read them as bytes, not text.
 */
function textContent(types: string | readonly string[]): Record<string, unknown> {
  return Object.fromEntries(
    [types]
      .flat()
      .map((type) => [
        type,
        { schema: type.startsWith('text/') ? { type: 'string' } : { type: 'string', format: 'binary' } },
      ]),
  );
}

function successResponses(r: AnyRoute, schemas: Schemas): Record<string, unknown> {
  const ok = r.returns;
  const headers: Record<string, unknown> = always(r);
  for (const [name, h] of Object.entries(ok.headers ?? {}))
    headers[name] = header(h.description, h.type, h.required);
  if (ok.location !== undefined) headers.Location = header('URL of the created resource');
  const json = (s: z.ZodType) => ({ 'application/json': { schema: schemas.convert(s, 'output') } });
  const out: Record<string, unknown> = {};
  switch (ok.kind) {
    case 'data':
      out[ok.status] = { description: ok.description, headers, content: json(z.object({ data: ok.schema })) };
      break;
    case 'list':
      out[200] = {
        description: ok.description,
        headers: { ...headers, ...PAGE_HEADERS },
        content: json(listEnvelope(ok.schema)),
      };
      break;
    case 'bare':
      out[ok.status] = {
        description: ok.description,
        headers: ok.paged === undefined ? headers : { ...headers, ...PAGE_HEADERS },
        content: json(ok.schema),
      };
      break;
    case 'empty':
      out[204] = { description: ok.description, headers };
      break;
    case 'text':
      out[200] = {
        description: ok.description,
        headers,
        content: textContent(ok.contentType),
      };
      if (ok.partial !== undefined)
        out[206] = {
          description: ok.partial,
          headers: { ...headers, 'Content-Range': header('`bytes start-end/size`', 'string', true) },
          content: textContent(ok.contentType),
        };
      if (ok.redirect !== undefined)
        out[302] = {
          description: ok.redirect,
          headers: { ...always(r), Location: header('where the bytes are', 'string', true) },
        };
      break;
  }
  if (ok.noContent !== undefined) out[204] = { description: ok.noContent, headers: always(r) };
  if (ok.etag !== undefined) {
    const etag = header(`a strong validator: ${ok.etag}`);
    for (const status of ['200', '206']) {
      const res = out[status] as { headers: Record<string, unknown> } | undefined;
      if (res !== undefined) res.headers.ETag = etag;
    }
    out[304] = {
      description: '`If-None-Match` lists the current `ETag`: the copy the client has is current (no body)',
      headers: { ...always(r), ETag: etag },
    };
  }
  if (r.links !== undefined) {
    const status = ok.kind === 'data' || ok.kind === 'bare' ? ok.status : 200;
    const links = Object.entries(r.links).map(([operationId, parameters]) => [
      operationId,
      { operationId, parameters },
    ]);
    (out[status] as Record<string, unknown>).links = Object.fromEntries(links);
  }
  return out;
}

function parametersOf(r: AnyRoute, schemas: Schemas): unknown[] {
  const parameters: unknown[] = [...r.path.matchAll(/([:*])([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => {
    const name = m[2]!;
    const rest = m[1] === '*';
    const declared = r.params?.[name];
    return {
      name,
      in: 'path',
      required: true,
      schema:
        declared === undefined
          ? { type: 'string', minLength: 1 }
          : isPathInt(declared)
            ? { type: 'integer', minimum: 0 }
            : schemas.convert(declared, 'input'),
      ...(rest
        ? {
            description: 'may span several segments (`a/b/c`); an encoded `/` (`%2F`) is accepted too',
            'x-multi-segment': true,
          }
        : {}),
    };
  });
  if (r.query !== undefined) {
    const q = schemas.convert(r.query, 'input') as {
      properties?: Record<string, JsonSchema>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema });
    }
  }
  return parameters;
}

/**
 * Builds the OpenAPI 3.1 document of one API variant from the route table (the zod schemas are
 * the source): the routes of that variant, with their bodies, queries and answers in it.
 */
export function openapiDocument(
  api: Api,
  version: string,
  serverUrl: string,
  variant: ApiVariant = 'current',
): OpenApiDocument {
  const schemas = new Schemas();
  schemas.convert(errorEnvelope, 'output');
  const paths: Record<string, Record<string, unknown>> = {};
  const routes = api.routes.flatMap((r) => routeIn(r, variant) ?? []);
  const ids = new Set(routes.map((r) => r.operationId));
  for (const r of routes) {
    for (const target of Object.keys(r.links ?? {})) {
      if (!ids.has(target)) throw new Error(`OpenAPI: ${r.operationId} links to unknown operation ${target}`);
    }
    const oaPath = r.path.replace(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
    const responses = successResponses(r, schemas);
    for (const [status, text] of errorsOf(r)) responses[status] = errorResponse(r, status, text);
    const op: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      tags: [r.tag],
      parameters: parametersOf(r, schemas),
      security: r.session === true ? [...security[r.auth], { session: [] }] : security[r.auth],
      responses,
    };
    if (r.form !== undefined) {
      op.requestBody = {
        required: true,
        content: { 'multipart/form-data': { schema: schemas.convert(r.form, 'input') } },
      };
    } else if (r.body !== undefined) {
      // A raw text body may be empty (a log append of nothing answers the stored size).
      op.requestBody = r.rawBody
        ? { required: false, content: { 'text/plain': { schema: { type: 'string' } } } }
        : {
            required: r.optionalBody !== true,
            content: { 'application/json': { schema: schemas.convert(r.body, 'input') } },
          };
    }
    (paths[oaPath] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.1.1',
    info: {
      title: 'Triad API',
      version,
      description: `${DESCRIPTION}\n\n${VARIANT_TEXT[variant]}`,
      'x-api-variant': variant,
    },
    servers: [{ url: serverUrl }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API token' },
        agentBearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'CI agent token (only under /api/v1/ci/)',
        },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: 'triad_session',
          description:
            'a signed-in web session (`__Host-triad_session` over https); accepted only by the operations listing it, as its user with every scope',
        },
      },
      headers: {
        'X-Request-Id': header('the request id (echoed from the request when given, else generated)'),
        [VARIANT_HEADER]: {
          description: 'the API variant the request was answered in',
          required: true,
          schema: { type: 'string', enum: ['current', 'earlier'] },
        },
      },
      schemas: Object.fromEntries(Object.entries(schemas.named).sort(([a], [b]) => a.localeCompare(b))),
    },
    paths,
  };
}
