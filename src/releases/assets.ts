import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { isDbId, isForeignKeyViolation } from '../db/sql.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import type { IncomingUpload } from '../http/multipart.ts';
import { parseRange } from '../http/range.ts';
import { BlobNotFound, StorageUnavailable, attachment } from '../storage/index.ts';
import { GateFull } from '../vcs/process/gate.ts';
import type { ArchiveFormat } from '../vcs/index.ts';
import { repoUrl, visibleRelease, type ReleasesDeps, type Shared, type Viewer } from './common.ts';
import { assetPrefix } from './records.ts';
import * as db from './repository.ts';
import { assetJson, type AssetJson } from './schemas.ts';

/** A download: the bytes (whole or one range) or a redirect to a presigned URL. */
export type Download =
  | { kind: 'redirect'; url: string }
  | { kind: 'bytes'; status: 200 | 206; headers: Record<string, string>; body: Readable };

/** Presigned download URLs are valid this long. */
const PRESIGN_SECONDS = 300;
/** Orphaned objects are removed this long after they were written (uploads in flight are younger). */
export const SWEEP_GRACE_MS = 15 * 60_000;
/** Longest label kept (the column is `text`; this bounds it). */
const LABEL_MAX = 1000;

/**
 * Release assets: uploads streamed to the blob store (sha256 computed on the way), lists,
 * downloads (streamed or redirected), deletion, the orphan sweeper, and source archives.
 *
 * Consistency: an upload stores the object first and inserts its row after; a deletion removes
 * the row first and the object after. A failure in between leaves an object without a row, never
 * a row without its object, and `sweep` removes such objects. The sweeper only removes objects
 * older than `sweepGraceMs`, so an upload refuses to write its row when more than half of that
 * passed since its object was stored (a client stalling after the file part), and checks after the
 * insert that the object is still there (else the row goes again: 503).
 */
export class ReleaseAssets {
  private readonly d: ReleasesDeps;
  private readonly shared: Shared;
  /** How old an object without a row must be for the sweeper to remove it. */
  sweepGraceMs = SWEEP_GRACE_MS;

  constructor(d: ReleasesDeps, shared: Shared) {
    this.d = d;
    this.shared = shared;
  }

  async list(t: RepoTarget, releaseId: number, v: Viewer): Promise<AssetJson[]> {
    const r = await visibleRelease(this.d.em(), t, releaseId, v);
    const [json] = await this.shared.json(t, [r]);
    return json?.assets ?? [];
  }

  async upload(t: RepoTarget, actor: Actor, releaseId: number, upload: IncomingUpload): Promise<AssetJson> {
    const r = await visibleRelease(this.d.em(), t, releaseId, { drafts: true });
    const file = await upload.file();
    const typeProblem = contentTypeProblem(file.contentType);
    if (typeProblem !== undefined) {
      upload.abandon();
      throw ApiError.validation(typeProblem);
    }
    const key = `${assetPrefix(t.repo.id, r.id)}${randomUUID()}`;
    const hash = createHash('sha256');
    const hashed = Readable.from(
      (async function* () {
        for await (const chunk of file.stream as AsyncIterable<Buffer>) {
          hash.update(chunk);
          yield chunk;
        }
      })(),
      { objectMode: false },
    );
    let size: number;
    try {
      ({ size } = await this.d.blobs.put(key, hashed, { contentType: file.contentType }));
    } catch (e) {
      upload.abandon();
      if (e instanceof ApiError) throw e; // the body: too large, malformed, ended early
      if (e instanceof StorageUnavailable) {
        this.d.log.warn({ err: e, release: r.id }, 'asset upload: blob store failed');
        throw ApiError.storageUnavailable();
      }
      throw ApiError.badRequest(`the upload failed: ${(e as Error).message}`);
    }
    const storedAt = Date.now();
    const grace = this.sweepGraceMs;
    const drop = async () => {
      await this.d.blobs.delete(key).catch((err: unknown) => {
        this.d.log.warn({ err, key }, 'asset object left for the sweeper');
      });
    };
    let fields: Record<string, string>;
    try {
      fields = await upload.end();
    } catch (e) {
      await drop();
      throw e;
    }
    // The name's length is that of the field as sent (as documented), before trimming.
    const given = fields.name ?? file.filename;
    const name = given.trim();
    const label = fields.label ?? '';
    const problem = assetNameProblem(given.length > 255 ? given : name) ?? labelProblem(label);
    if (problem !== undefined) {
      await drop();
      throw ApiError.validation(problem);
    }
    if (Date.now() - storedAt > grace / 2) {
      // the sweeper may take the object any time now: no row for it
      await drop();
      throw ApiError.badRequest('the request body stalled too long after the file; upload it again');
    }
    const row = await db
      .insertAsset(this.d.em(), {
        release_id: r.id,
        repo_id: t.repo.id,
        name,
        label,
        size,
        content_type: file.contentType || 'application/octet-stream',
        sha256: hash.digest('hex'),
        blob_key: key,
        uploader_id: actor.id,
      })
      .catch(async (e: unknown) => {
        await drop();
        // the release was deleted while the body streamed
        if (isForeignKeyViolation(e)) throw ApiError.notFound('release');
        throw e;
      });
    if (row === undefined) {
      await drop();
      throw ApiError.conflict(`the release has an asset named ${name} already`);
    }
    await this.ensureStored(row.id, key);
    return assetJson(row, `${repoUrl(this.d.baseUrl(), t)}/releases/${r.id}`, await this.people([actor.id]));
  }

  /** The asset's bytes (one `Range` honoured) or, when configured, a redirect to a presigned URL; counts the download. */
  async download(
    t: RepoTarget,
    releaseId: number,
    assetId: number,
    v: Viewer,
    rangeHeader: string | undefined,
  ): Promise<Download> {
    const r = await visibleRelease(this.d.em(), t, releaseId, v);
    const a = isDbId(assetId) ? await db.asset(this.d.em(), r.id, assetId) : undefined;
    if (a === undefined) throw ApiError.notFound('asset');
    const size = Number(a.size);
    const range = parseRange(rangeHeader, size);
    if (range === 'unsatisfiable') {
      const message = `the range asked for starts past the end of the ${size} bytes of the asset`;
      throw new ApiError(416, 'range_not_satisfiable', message, { 'Content-Range': `bytes */${size}` });
    }
    try {
      if (this.d.redirectDownloads) {
        const url = await this.d.blobs.presignedGet(a.blob_key, PRESIGN_SECONDS, {
          filename: a.name,
          contentType: a.content_type,
        });
        if (url !== undefined) {
          await db.countDownload(this.d.em(), a.id);
          return { kind: 'redirect', url };
        }
      }
      const body = await this.d.blobs.get(a.blob_key, range);
      if (range === undefined || range.start === 0) await db.countDownload(this.d.em(), a.id);
      const headers: Record<string, string> = {
        'Content-Type': 'application/octet-stream',
        'Content-Disposition': attachment(a.name),
        'Accept-Ranges': 'bytes',
        'Content-Length': String(range === undefined ? size : range.end - range.start + 1),
        Digest: `sha-256=${Buffer.from(a.sha256, 'hex').toString('base64')}`,
      };
      if (range !== undefined) headers['Content-Range'] = `bytes ${range.start}-${range.end}/${size}`;
      return { kind: 'bytes', status: range === undefined ? 200 : 206, headers, body };
    } catch (e) {
      if (e instanceof StorageUnavailable || e instanceof BlobNotFound) {
        this.d.log.warn({ err: e, asset: a.id }, 'asset download: blob store failed');
        throw ApiError.storageUnavailable();
      }
      throw e;
    }
  }

  /** Deletes the asset row, then its object (a failure there leaves it to the sweeper). */
  async remove(t: RepoTarget, releaseId: number, assetId: number): Promise<void> {
    const r = await visibleRelease(this.d.em(), t, releaseId, { drafts: true });
    const a = isDbId(assetId) ? await db.asset(this.d.em(), r.id, assetId) : undefined;
    if (a === undefined) throw ApiError.notFound('asset');
    const key = await this.d.em().transactional((tx) => db.removeAsset(tx, a.id));
    if (key === undefined) return;
    await this.d.blobs.delete(key).catch((err: unknown) => {
      this.d.log.warn({ err, key }, 'asset object left for the sweeper');
    });
  }

  /**
   * Removes asset objects without a row that are older than `graceMs` (younger ones may be
   * uploads whose row is about to be written), and puts that never finished (S3 multipart
   * uploads, temporary files) started more than `incompleteGraceMs` ago (a large upload may
   * still be running). Answers how many were removed.
   */
  async sweep(graceMs: number, incompleteGraceMs = graceMs): Promise<number> {
    const before = Date.now() - graceMs;
    let removed = 0;
    let batch: string[] = [];
    const flush = async () => {
      const keys = batch;
      batch = [];
      const known = await db.knownKeys(this.d.em().fork(), keys);
      for (const k of keys) {
        if (known.has(k)) continue;
        await this.d.blobs.delete(k);
        removed += 1;
      }
    };
    for await (const o of this.d.blobs.list('releases/')) {
      if (o.modifiedAt.getTime() > before) continue;
      batch.push(o.key);
      if (batch.length >= 500) await flush();
    }
    await flush();
    removed += await this.d.blobs.sweepIncomplete('releases/', new Date(Date.now() - incompleteGraceMs));
    if (removed > 0) this.d.log.info({ removed }, 'removed asset objects without a release asset');
    return removed;
  }

  /**
   * A source archive of `rev` (a commit, branch, bookmark or tag): headers and the streamed bytes,
   * once a slot of the transports' cap is free (503 with `Retry-After` when its queue is full);
   * `signal`: the client left. Undefined when `unchanged` says the client's copy is current.
   */
  async archive(
    t: RepoTarget,
    rev: string,
    format: ArchiveFormat,
    signal: AbortSignal,
    unchanged?: (version: string) => boolean,
  ): Promise<{ headers: Record<string, string>; body: AsyncIterable<Buffer> } | undefined> {
    const repo = await this.d.repos.handle(t);
    const dir = repo.path;
    const commit = await this.d.vcs.ops(repo.vcs).resolveCommit(dir, rev);
    if (commit === undefined) throw ApiError.notFound('revision');
    const prefix = `${t.repo.name}-${rev}`.replace(/[^A-Za-z0-9._+-]+/g, '-');
    // The commit, the format and the folder name inside decide the bytes: a current copy is not made again.
    if (unchanged?.([commit, format, prefix].join('\u0000')) === true) return undefined;
    const body = await this.d.archives
      .archive(repo.driver, { dir, commit, format, prefix }, signal)
      .catch((e: unknown) => {
        if (!(e instanceof GateFull) && !signal.aborted) throw e;
        const message = 'too many archive, clone and push requests at once; try again later';
        const retry = { 'Retry-After': String(this.d.retryAfterSeconds) };
        throw new ApiError(503, 'service_unavailable', message, retry);
      });
    return {
      headers: {
        'Content-Type': format === 'zip' ? 'application/zip' : 'application/gzip',
        'Content-Disposition': attachment(`${prefix}.${format}`),
      },
      body,
    };
  }

  /** No row without its object: when the sweeper took the object after all, the row goes (503). */
  private async ensureStored(assetId: number, key: string): Promise<void> {
    let there: boolean;
    try {
      there = (await this.d.blobs.stat(key)) !== undefined;
    } catch (e) {
      // the store cannot tell: the row stays (the object was stored; a download reports the store)
      this.d.log.warn({ err: e, key }, 'asset upload: the stored object could not be checked');
      return;
    }
    if (there) return;
    await this.d.em().transactional((tx) => db.removeAsset(tx, assetId));
    this.d.log.warn({ key }, 'asset upload: the object was swept before its row was written');
    throw ApiError.storageUnavailable(
      'the stored file was removed before the upload finished; upload it again',
    );
  }

  private async people(ids: number[]) {
    const refs = await this.d.users.refs(ids);
    return new Map([...refs].map(([id, u]) => [id, { id: u.id, username: u.username }]));
  }
}

/** Why an asset name is refused, or undefined. */
function assetNameProblem(name: string): string | undefined {
  if (name === '') return 'name: give the file a name (the `name` field or the file name)';
  if (name.length > 255) return 'name: at most 255 characters';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f/\\]/.test(name)) return 'name: no control characters or slashes';
  return undefined;
}

/** Why a label is refused, or undefined (line breaks and tabs are allowed; PostgreSQL text holds no NUL). */
function labelProblem(label: string): string | undefined {
  if (label.length > LABEL_MAX) return `label: at most ${LABEL_MAX} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(label)) return 'label: no control characters';
  return undefined;
}

/** Why the file part's `Content-Type` is refused (it is stored in a varchar(255)), or undefined. */
function contentTypeProblem(type: string): string | undefined {
  if (type.length > 255) return "the file part's Content-Type: at most 255 characters";
  if (!/^[\x20-\x7e]*$/.test(type)) return "the file part's Content-Type: printable ASCII only";
  return undefined;
}
