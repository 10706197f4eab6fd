/** The blob store (see blob.ts for the contract) and the choice of its driver. */
import { FsBlobStore } from './fs.ts';
import { S3BlobStore, type S3Settings } from './s3.ts';
import type { BlobStore } from './blob.ts';
import { tracedBlobStore } from './traced.ts';

export * from './blob.ts';
export { FsBlobStore } from './fs.ts';
export { S3BlobStore, type S3Settings } from './s3.ts';

/**
 * S3/MinIO when `s3` is configured (`TRIAD_S3_ENDPOINT`), else files under `dir`. S3 calls are
 * traced (client spans, traced.ts).
 */
export function openBlobStore(opts: { dir: string; s3: S3Settings | undefined }): BlobStore {
  return opts.s3 === undefined ? new FsBlobStore(opts.dir) : tracedBlobStore(new S3BlobStore(opts.s3));
}
