import createClient from 'openapi-fetch';
import type { paths } from './triad-api.ts';

/**
 * What a third-party program does with a client generated from Triad's OpenAPI document
 * (`openapi-typescript` types, `openapi-fetch` calls), written as such a program would be: no
 * casts, so `npm run typecheck` proves the document lets a generated client upload a release
 * asset and download an archive. The types (triad-api.ts) are generated from the served document
 * by test/integration/openapi-tools.test.ts, which also runs these against a real server.
 */
export function triadClient(baseUrl: string, token: string) {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}
type TriadClient = ReturnType<typeof triadClient>;

/** Creates a release of a new tag at `target` and uploads one asset to it: the asset record. */
export async function releaseWithAsset(
  client: TriadClient,
  where: { org: string; repo: string; tag: string; target: string },
  file: { name: string; bytes: Uint8Array<ArrayBuffer>; label?: string },
) {
  const path = { org: where.org, repo: where.repo };
  const created = await client.POST('/api/v1/repos/{org}/{repo}/releases', {
    params: { path },
    body: { tag_name: where.tag, target_commitish: where.target, name: where.tag },
  });
  if (created.data === undefined) throw new Error(`create release: ${created.response.status}`);
  const release = created.data.data;
  const uploaded = await client.POST('/api/v1/repos/{org}/{repo}/releases/{id}/assets', {
    params: { path: { ...path, id: release.id } },
    body: { attachment: new Blob([file.bytes]), name: file.name, label: file.label },
    bodySerializer: (body) => {
      const form = new FormData();
      form.set('attachment', body.attachment, file.name);
      if (body.name !== undefined) form.set('name', body.name);
      if (body.label !== undefined) form.set('label', body.label);
      return form;
    },
  });
  if (uploaded.data === undefined) throw new Error(`upload: ${uploaded.response.status}`);
  return { release, asset: uploaded.data.data };
}

/**
 * Downloads the tar.gz archive of `rev`: its bytes and `ETag`, or, given the `ETag` of a copy
 * the caller has, `notModified` when that copy is current.
 */
export async function downloadArchive(
  client: TriadClient,
  where: { org: string; repo: string; rev: string },
  ifNoneMatch?: string,
) {
  const r = await client.GET('/api/v1/repos/{org}/{repo}/archive/{rev}.tar.gz', {
    params: { path: where },
    parseAs: 'arrayBuffer',
    headers: ifNoneMatch === undefined ? {} : { 'If-None-Match': ifNoneMatch },
  });
  const etag = r.response.headers.get('ETag') ?? undefined;
  if (r.response.status === 304) return { notModified: true as const, etag };
  if (r.data === undefined) throw new Error(`archive: ${r.response.status}`);
  return { notModified: false as const, etag, bytes: new Uint8Array(r.data) };
}

/** The asset's bytes, through its download URL. */
export async function downloadAsset(
  client: TriadClient,
  where: { org: string; repo: string; id: number; asset_id: number },
) {
  const r = await client.GET('/api/v1/repos/{org}/{repo}/releases/{id}/assets/{asset_id}/download', {
    params: { path: where },
    parseAs: 'arrayBuffer',
  });
  if (r.data === undefined) throw new Error(`asset download: ${r.response.status}`);
  return new Uint8Array(r.data);
}
