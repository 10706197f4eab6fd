/**
 * The manifest of a repository's backup (`repos/<id>/manifest.json`) and the byte moves every kind
 * shares: uploading a data object with its sha256, downloading one and checking it. The manifest is
 * the only thing a restore trusts: data objects it does not name (left by a backup that stopped
 * before its manifest) are ignored, and are overwritten by the next backup, which reuses their
 * sequence number.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { BlobNotFound, type BlobStore } from '../../storage/blob.ts';
import type { VcsKind } from '../../vcs/constants.ts';

/** No backup of the repository: its manifest does not exist. */
export class BackupNotFound extends Error {}

/** Time limit of one VCS command of a backup or a restore (a bundle of a large history). */
export const COMMAND_TIMEOUT_MS = 30 * 60_000;

const sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const ids = z.record(z.string(), z.string());

export const gitRefs = z.object({
  /** HEAD as its file holds it: `ref: refs/heads/main`, or a commit id when detached. */
  head: z.string(),
  /** Every ref (`refs/heads/…`, `refs/tags/…`, any other) -> the object it names (tag objects unpeeled). */
  refs: ids,
});
export const hgRefs = z.object({
  bookmarks: ids,
  /** Named branch -> its heads (closed ones too). */
  branches: z.record(z.string(), z.array(z.string())),
  /** Tag -> changeset (`tip` left out); global tags come with the changesets of `.hgtags`. */
  tags: ids,
  /** The roots of the non-public changesets and of the secret ones: together they give every phase. */
  phases: z.object({ draftRoots: z.array(z.string()), secretRoots: z.array(z.string()) }),
  /** `.hg/localtags`, which no changeset carries, when the repository has one. */
  localtags: z.string().optional(),
});
export const fossilRefs = z.object({
  /** sha256 and size of the repository file the last data object holds. */
  sha256,
  size: z.number().int().nonnegative(),
  /** Branch -> its newest leaf. */
  branches: ids,
  /** Symbolic tag -> the check-in it is on. */
  tags: ids,
});
export type GitRefs = z.infer<typeof gitRefs>;
export type HgRefs = z.infer<typeof hgRefs>;
export type FossilRefs = z.infer<typeof fossilRefs>;

const base = {
  version: z.literal(1),
  repoId: z.number().int().nonnegative(),
  /** When the backup was taken (ISO 8601). */
  at: z.string(),
  /** The highest sequence number a data object of a manifest got so far. */
  seq: z.number().int().nonnegative(),
  /** The data objects a restore applies, in this order. */
  objects: z.array(z.string()),
  /** sha256 of every object of `objects`, checked when it is downloaded. */
  digests: z.record(z.string(), sha256),
  /** What the next backup takes as known: git ref targets, hg heads, fossil branch heads. */
  heads: z.array(z.string()),
};
const manifestSchema = z.discriminatedUnion('kind', [
  z.object({ ...base, kind: z.literal('git'), refs: gitRefs }),
  z.object({ ...base, kind: z.literal('hg'), refs: hgRefs }),
  z.object({ ...base, kind: z.literal('fossil'), refs: fossilRefs }),
]);
export type Manifest = z.infer<typeof manifestSchema>;

export const repoPrefix = (repoId: number) => `repos/${repoId}/`;
export const manifestKey = (repoId: number) => `${repoPrefix(repoId)}manifest.json`;
export const dataKey = (repoId: number, seq: number, ext: string) =>
  `${repoPrefix(repoId)}data/${String(seq).padStart(6, '0')}.${ext}`;

async function readAll(s: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/**
 * The repository's last manifest, undefined when it has none. A manifest that does not parse, or
 * that names another repository or kind, or objects outside the repository's prefix, is an error:
 * backing up over it or restoring from it would be wrong either way.
 */
export async function readManifest(
  blob: BlobStore,
  repoId: number,
  kind: VcsKind,
): Promise<Manifest | undefined> {
  const key = manifestKey(repoId);
  let text: Buffer;
  try {
    text = await readAll(await blob.get(key));
  } catch (e) {
    if (e instanceof BlobNotFound) return undefined;
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text.toString('utf8'));
  } catch {
    throw new Error(`${key}: not a backup manifest (not JSON)`);
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) throw new Error(`${key}: not a backup manifest: ${parsed.error.message}`);
  const m = parsed.data;
  if (m.repoId !== repoId || m.kind !== kind)
    throw new Error(`${key} is the backup of ${m.kind} repository ${m.repoId}, not ${kind} ${repoId}`);
  const foreign = m.objects.find(
    (k) => !k.startsWith(`${repoPrefix(repoId)}data/`) || m.digests[k] === undefined,
  );
  if (foreign !== undefined) throw new Error(`${key} names an object it cannot: ${foreign}`);
  return m;
}

/** Writes the manifest (a put replaces the previous one only once it is complete). */
export async function writeManifest(blob: BlobStore, m: Manifest): Promise<number> {
  const body = Buffer.from(`${JSON.stringify(m)}\n`, 'utf8');
  const { size } = await blob.put(manifestKey(m.repoId), body, { contentType: 'application/json' });
  return size;
}

/** A stream stage that hashes what passes through it. */
function hashing(): { stage: Transform; digest: () => string } {
  const h = createHash('sha256');
  const stage = new Transform({
    transform(chunk: Buffer, _enc, done) {
      h.update(chunk);
      done(null, chunk);
    },
  });
  return { stage, digest: () => h.digest('hex') };
}

/** Uploads `file` under `key`; answers its size and sha256 (of the bytes that were sent). */
export async function uploadFile(
  blob: BlobStore,
  key: string,
  file: string,
): Promise<{ size: number; sha256: string }> {
  const { stage, digest } = hashing();
  const source = createReadStream(file);
  source.on('error', (e) => stage.destroy(e));
  const { size } = await blob.put(key, source.pipe(stage), { contentType: 'application/octet-stream' });
  return { size, sha256: digest() };
}

/** sha256 of a file's bytes. */
export async function fileDigest(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file) as AsyncIterable<Buffer>) h.update(c);
  return h.digest('hex');
}

/** Downloads `key` to `file` and checks its sha256 against the manifest's. */
export async function downloadFile(
  blob: BlobStore,
  key: string,
  file: string,
  expected: string,
): Promise<void> {
  const { stage, digest } = hashing();
  await pipeline(await blob.get(key), stage, createWriteStream(file, { flags: 'wx' }));
  const got = digest();
  if (got !== expected) throw new Error(`${key}: sha256 ${got}, the manifest recorded ${expected}`);
}

/** What a kind's backup found: the data object to upload (a file under the work directory), if any, and the refs. */
export type Captured<R> = { data: string | undefined; heads: string[]; refs: R };

/** The data objects of a manifest, downloaded on demand into files the kind chooses. */
export type Objects = { keys: readonly string[]; fetch: (key: string, file: string) => Promise<void> };

/** One kind's side of backups. `work` is a fresh directory under the caller's tmpDir, removed afterwards. */
export type KindBackup<R> = {
  /** File name extension of its data objects. */
  ext: string;
  /** Whether a new data object replaces the earlier ones (Fossil: the whole file) instead of following them. */
  replaces: boolean;
  /** What changed since `prev` (the previous manifest's heads and refs; undefined for a first backup). */
  capture(dir: string, prev: { heads: string[]; refs: R } | undefined, work: string): Promise<Captured<R>>;
  /** Builds the repository at `stage` (which does not exist) from `objects`, then makes its refs exactly `m`'s. */
  restore(stage: string, objects: Objects, m: { heads: string[]; refs: R }, work: string): Promise<void>;
};
