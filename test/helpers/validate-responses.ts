import { afterAll, afterEach } from '@jest/globals';
import { ResponseChecker, type OpenApiDoc } from './openapi-check.ts';

/**
 * Every response a test receives from a Triad server through `fetch` (the test `Client`, the
 * agent under test, direct calls) is checked against the server's own OpenAPI document of the API
 * variant the response was answered in (`/api/v1/openapi.json?variant=` its `X-Svc-Api-Variant`,
 * current without one): declared status, content type, required headers and the JSON body
 * against the operation's schema. A mismatch fails the running test (in `afterEach`), so the whole
 * integration suite keeps the document honest. Servers that are not Triad (a fake Kubernetes API)
 * are recognised by their document and left alone.
 */
type State = {
  realFetch: typeof fetch;
  checkers: Map<string, Promise<ResponseChecker | undefined>>;
  problems: string[];
  checked: number;
  /** Of them, answered in the earlier API variant (checked against its document). */
  earlier: number;
};
const KEY = Symbol.for('triad.openapi-check');
const installed = (globalThis as Record<symbol, State | undefined>)[KEY];
const state: State = installed ?? {
  realFetch: globalThis.fetch,
  checkers: new Map(),
  problems: [],
  checked: 0,
  earlier: 0,
};
(globalThis as Record<symbol, State | undefined>)[KEY] = state;
const { realFetch, checkers, problems } = state;
const PATHS = /^\/(api\/|healthz|readyz|metrics)/i;

function checkerFor(origin: string, variant: string): Promise<ResponseChecker | undefined> {
  const key = `${origin} ${variant}`;
  let c = checkers.get(key);
  if (c === undefined) {
    c = (async () => {
      try {
        const r = await realFetch(`${origin}/api/v1/openapi.json?variant=${variant}`);
        const doc = (await r.json()) as OpenApiDoc & { info?: { title?: string } };
        return r.ok && doc.info?.title === 'Triad API' ? new ResponseChecker(doc) : undefined;
      } catch {
        return undefined;
      }
    })();
    checkers.set(key, c);
  }
  return c;
}

function requestOf(input: Parameters<typeof fetch>[0], init: Parameters<typeof fetch>[1]) {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  return { url, method };
}

/** How many responses were checked so far in this test file. */
export function checkedResponses(): number {
  return state.checked;
}

/** How many of them were answered in the earlier API variant. */
export function checkedEarlierResponses(): number {
  return state.earlier;
}

const checkedFetch: typeof fetch = async (input, init) => {
  const res = await realFetch(input, init);
  const { url, method } = requestOf(input, init);
  const local = url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]';
  if (!local || !PATHS.test(url.pathname)) return res;
  const variant = res.headers.get('x-svc-api-variant') === 'earlier' ? 'earlier' : 'current';
  const checker = await checkerFor(url.origin, variant);
  if (variant === 'earlier') state.earlier += 1;
  if (checker === undefined) return res;
  const json = (res.headers.get('content-type') ?? '').includes('json');
  const text =
    json && method !== 'HEAD'
      ? await res
          .clone()
          .text()
          .catch(() => undefined)
      : undefined;
  // A text or stream body is not read here (the caller may stream it): its status, type and headers are.
  const body = json ? text : res.status === 204 ? '' : undefined;
  const problem = checker.check(method, url.pathname, res.status, res.headers, body);
  state.checked += 1;
  if (problem !== undefined) problems.push(problem);
  return res;
};
if (installed === undefined) globalThis.fetch = checkedFetch;

function report(): void {
  if (problems.length === 0) return;
  const all = problems.splice(0);
  throw new Error(`responses that do not match the OpenAPI document:\n${all.join('\n')}`);
}

if (installed === undefined) {
  afterEach(report);
  afterAll(report);
}
