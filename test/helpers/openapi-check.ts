import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type Schema = Record<string, unknown>;
type HeaderObject = { required?: boolean; $ref?: string };
type ResponseObject = {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema: Schema }>;
};
type Operation = {
  parameters?: { name: string; in: string; schema?: { type?: string }; 'x-multi-segment'?: boolean }[];
  responses: Record<string, ResponseObject>;
};
export type OpenApiDoc = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; headers?: Record<string, HeaderObject> };
};

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const DOC_ID = 'https://triad.invalid/openapi';

/**
 * OpenAPI 3.1 schema object (JSON Schema 2020-12) -> a schema for ajv: component `$ref`s point
 * into the document, and every object with `properties` is closed (`additionalProperties: false`)
 * so a field the server sends but the document does not describe is a mismatch.
 */
export function toJsonSchema(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toJsonSchema);
  if (typeof v !== 'object' || v === null) return v;
  const out: Schema = {};
  for (const [k, x] of Object.entries(v as Schema)) {
    if (k === '$ref' && typeof x === 'string')
      out[k] = x.replace('#/components/schemas/', `${DOC_ID}#/$defs/`);
    else if (k === 'properties' || k === '$defs') {
      out[k] = Object.fromEntries(Object.entries(x as Schema).map(([n, p]) => [n, toJsonSchema(p)]));
    } else out[k] = toJsonSchema(x);
  }
  if (out.properties !== undefined && out.additionalProperties === undefined)
    out.additionalProperties = false;
  return out;
}

type Route = { method: string; regex: RegExp; op: Operation };

/** Checks responses against the operation (method + path template + status) of an OpenAPI document. */
export class ResponseChecker {
  private readonly ajv = new Ajv2020({ allErrors: true, strict: true });
  private readonly routes: Route[] = [];
  private readonly templates: RegExp[] = [];
  private readonly compiled = new Map<Schema, ValidateFunction>();
  private readonly doc: OpenApiDoc;

  constructor(doc: OpenApiDoc) {
    this.doc = doc;
    addFormats(this.ajv);
    this.ajv.addFormat('binary', true);
    this.ajv.addSchema({ $id: DOC_ID, $defs: toJsonSchema(doc.components.schemas) as Schema });
    for (const [template, ops] of Object.entries(doc.paths)) {
      let regex: RegExp | undefined;
      for (const [method, op] of Object.entries(ops)) {
        regex ??= templateRegex(template, op);
        this.routes.push({ method: method.toUpperCase(), regex, op });
      }
      if (regex !== undefined) this.templates.push(regex);
    }
  }

  /** A description of what does not match the document, or undefined when the response fits. */
  check(
    method: string,
    path: string,
    status: number,
    headers: Headers,
    text: string | undefined,
  ): string | undefined {
    const where = `${method} ${path} -> ${status}`;
    const m = method === 'HEAD' ? 'GET' : method;
    const route = this.routes.find((r) => r.method === m && r.regex.test(path));
    if (route === undefined) return this.checkUnrouted(where, method, path, status, headers, text);
    const declared = route.op.responses[String(status)];
    if (declared === undefined) {
      return `${where}: status ${status} is not declared (declared: ${Object.keys(route.op.responses).join(', ')}); body ${text?.slice(0, 300)}`;
    }
    for (const [name, h] of Object.entries(declared.headers ?? {})) {
      const header = h.$ref === undefined ? h : this.doc.components.headers?.[h.$ref.split('/').pop()!];
      if (header?.required === true && !headers.has(name))
        return `${where}: required header ${name} is missing`;
    }
    const type = (headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (declared.content === undefined) {
      if (text !== undefined && text !== '')
        return `${where}: declares no body but got ${text.slice(0, 200)}`;
      return undefined;
    }
    const media = Object.entries(declared.content).find(
      ([t]) => t.split(';')[0]!.trim().toLowerCase() === type,
    );
    if (media === undefined) {
      return `${where}: content type "${type}" is not declared (${Object.keys(declared.content).join(', ')})`;
    }
    if (type === 'application/json' && text !== undefined && method !== 'HEAD') {
      return this.validate(where, media[1].schema, text);
    }
    return undefined;
  }

  /** A path of the document with a method it does not have (405, OPTIONS 204), or no path at all (404). */
  private checkUnrouted(
    where: string,
    method: string,
    path: string,
    status: number,
    headers: Headers,
    text: string | undefined,
  ): string | undefined {
    const known = this.templates.some((t) => t.test(path));
    const expected = known ? (method === 'OPTIONS' ? [204, 401, 429] : [405, 401, 429]) : [404, 401, 429];
    if (!expected.includes(status))
      return `${where}: expected one of ${expected.join(', ')} for an undeclared ${known ? 'method' : 'path'}`;
    if (known && (status === 405 || status === 204) && !headers.has('allow'))
      return `${where}: no Allow header`;
    if (status === 204 || method === 'HEAD') return undefined;
    return this.validate(where, { $ref: '#/components/schemas/Error' }, text ?? '');
  }

  private validate(where: string, schema: Schema, text: string): string | undefined {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return `${where}: body is not JSON: ${text.slice(0, 200)}`;
    }
    let fn = this.compiled.get(schema);
    if (fn === undefined) {
      fn = this.ajv.compile(toJsonSchema(schema) as Schema);
      this.compiled.set(schema, fn);
    }
    if (fn(body)) return undefined;
    const errors = (fn.errors ?? []).map(
      (e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`,
    );
    return `${where}: body does not match the schema: ${errors.slice(0, 5).join('; ')}; body ${text.slice(0, 300)}`;
  }
}

function templateRegex(template: string, op: Operation): RegExp {
  const params = op.parameters ?? [];
  const ints = new Set(
    params.filter((p) => p.in === 'path' && p.schema?.type === 'integer').map((p) => p.name),
  );
  const multi = new Set(params.filter((p) => p['x-multi-segment'] === true).map((p) => p.name));
  const source = template
    .split(/(\{[^}]+\})/)
    .map((part) => {
      const name = /^\{(.+)\}$/.exec(part)?.[1];
      if (name === undefined) return part.replace(/[.*+?^$()|[\]\\]/g, '\\$&');
      if (ints.has(name)) return '(\\d+)';
      return multi.has(name) ? '(.+)' : '([^/]+)';
    })
    .join('');
  return new RegExp(`^${source}/?$`, 'i');
}
