import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';

type Doc = {
  paths: Record<string, unknown>;
  components: { schemas: Record<string, unknown> } & Record<string, unknown>;
} & Record<string, unknown>;

/** The paths triad-client.ts calls: its types are generated for these alone, so they change rarely. */
export const CLIENT_PATHS = [
  '/api/v1/repos/{org}/{repo}/releases',
  '/api/v1/repos/{org}/{repo}/releases/{id}/assets',
  '/api/v1/repos/{org}/{repo}/releases/{id}/assets/{asset_id}/download',
  '/api/v1/repos/{org}/{repo}/archive/{rev}.tar.gz',
];

export const HEADER = `// Generated from the served OpenAPI document by openapi-typescript, for the paths test/client/
// triad-client.ts calls (test/client/generate.ts). Do not edit: to rewrite it, run
//   UPDATE_CLIENT_TYPES=1 NODE_OPTIONS=--experimental-vm-modules npx jest test/integration/openapi-tools.test.ts
`;

/** The document cut to `CLIENT_PATHS` and the component schemas they reach. */
export function clientDocument(doc: Doc): Doc {
  const paths = Object.fromEntries(CLIENT_PATHS.map((p) => [p, doc.paths[p]]));
  for (const p of CLIENT_PATHS) if (paths[p] === undefined) throw new Error(`the document has no path ${p}`);
  const reached = new Set<string>();
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        const name =
          k === '$ref' && typeof x === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(x)?.[1] : undefined;
        if (name !== undefined && !reached.has(name)) {
          reached.add(name);
          walk(doc.components.schemas[name]);
        } else walk(x);
      }
    }
  };
  walk(paths);
  const schemas = Object.fromEntries([...reached].sort().map((n) => [n, doc.components.schemas[n]]));
  return { ...doc, paths, components: { ...doc.components, schemas } };
}

const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier('Blob'));

/** TypeScript types of the client's paths; bytes (`format: binary`) are `Blob`s. */
export async function clientTypes(doc: Doc): Promise<string> {
  const ast = await openapiTS(JSON.stringify(clientDocument(doc)), {
    transform: (schema) => (schema.format === 'binary' ? BLOB : undefined),
  });
  return HEADER + astToString(ast);
}
