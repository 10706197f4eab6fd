import { Transform, type Readable } from 'node:stream';
import type { Request } from 'express';
import busboy from 'busboy';
import { ApiError } from './errors.ts';

/**
 * One file of a multipart upload, read while it arrives; `before`: the text fields sent ahead of
 * it (what may be judged before a byte of the file is stored, such as the web's form token).
 */
export type IncomingFile = {
  stream: Readable;
  filename: string;
  contentType: string;
  before: Record<string, string>;
};

/**
 * A `multipart/form-data` request body holding one file (in `field`) and short text fields, parsed
 * as it streams (busboy): nothing is buffered beyond the parser's own chunks. Errors are
 * `ApiError`s: 415 for another content type, 413 when the file passes `maxBytes` (also from
 * `Content-Length` before anything is read), 400 for a broken body, a missing or second file.
 */
export type IncomingUpload = {
  /** Starts reading; resolves when the file part begins. */
  file(): Promise<IncomingFile>;
  /** Resolves once the whole body was read, with the text fields (the first value of each). */
  end(): Promise<Record<string, string>>;
  /** Stops reading (the rest of the body is discarded). */
  abandon(): void;
};

/** Multipart overhead allowed on top of the file in `Content-Length` (boundaries, part headers, fields). */
const OVERHEAD = 256 * 1024;

export function multipartUpload(req: Request, opts: { field: string; maxBytes: number }): IncomingUpload {
  // Nothing is checked or read before `file()`: the caller first decides whether the upload may
  // happen at all (an unknown release is a 404 whatever the body).
  let opened: IncomingUpload | undefined;
  // a refusal of the request itself (415, 413 by its length, a client gone) comes as a rejection
  const open = () => (opened ??= parse(req, opts));
  return {
    file: async () => await open().file(),
    end: async () => await open().end(),
    abandon: () => opened?.abandon(),
  };
}

function parse(req: Request, opts: { field: string; maxBytes: number }): IncomingUpload {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type)) {
    throw new ApiError(415, 'unsupported_media_type', 'the body must be multipart/form-data');
  }
  // A client gone before the body was read (while the request was authorised, its release looked
  // up...) is never heard of again: no `aborted` comes for a listener added now, and a destroyed
  // request gives the parser nothing more, so it would wait for good.
  if (req.destroyed || req.readableAborted) throw ApiError.badRequest('the request body ended early');
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > opts.maxBytes + OVERHEAD) {
    throw ApiError.tooLarge(`the asset is larger than the ${opts.maxBytes} bytes allowed`);
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      limits: { files: 2, fields: 20, fieldSize: 64 * 1024, parts: 30, fileSize: opts.maxBytes + 1 },
    });
  } catch (e) {
    throw ApiError.badRequest(`malformed multipart body: ${(e as Error).message}`);
  }
  const fields: Record<string, string> = {};
  let gotFile: ((f: IncomingFile) => void) | undefined;
  let failFile: ((e: unknown) => void) | undefined;
  const filePromise = new Promise<IncomingFile>((resolve, reject) => {
    gotFile = resolve;
    failFile = reject;
  });
  filePromise.catch(() => undefined);
  let files = 0;
  let failure: ApiError | undefined;
  let current: Transform | undefined;
  let currentSource: Readable | undefined;
  const fail = (e: ApiError): ApiError => {
    failure ??= e;
    failFile?.(failure);
    if (current !== undefined && !current.readableEnded) current.destroy(failure);
    // the parser goes on (to its end) only while the file part is read
    currentSource?.unpipe();
    currentSource?.resume();
    return failure;
  };
  const ended = new Promise<Record<string, string>>((resolve, reject) => {
    parser.on('field', (name, value) => {
      if (!(name in fields)) fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      files += 1;
      if (name !== opts.field || files > 1) {
        stream.resume();
        fail(
          ApiError.badRequest(
            files > 1 ? `exactly one file is allowed (field ${opts.field})` : `unexpected file field ${name}`,
          ),
        );
        return;
      }
      let size = 0;
      const counted = new Transform({
        transform(chunk: Buffer, _enc, done) {
          size += chunk.length;
          if (size > opts.maxBytes) {
            done(ApiError.tooLarge(`the asset is larger than the ${opts.maxBytes} bytes allowed`));
            return;
          }
          done(null, chunk);
        },
      });
      current = counted;
      currentSource = stream;
      // its reader sees errors while it reads; one after the reader finished has nobody to tell
      counted.on('error', () => undefined);
      stream.on('error', (e: Error) =>
        counted.destroy(ApiError.badRequest(`malformed multipart body: ${e.message}`)),
      );
      stream.pipe(counted);
      gotFile?.({
        stream: counted,
        filename: info.filename ?? '',
        contentType: info.mimeType,
        before: { ...fields },
      });
    });
    parser.on('error', (e: Error) => {
      reject(fail(ApiError.badRequest(`malformed multipart body: ${e.message}`)));
    });
    parser.on('close', () => {
      if (failure !== undefined) reject(failure);
      else if (files === 0) {
        reject(fail(ApiError.badRequest(`the file is missing (multipart field ${opts.field})`)));
      } else resolve(fields);
    });
  });
  ended.catch(() => undefined);
  // A client that goes away mid-body: the parser hears nothing more of it, so it is ended here
  // (its `close` rejects `end()` with this failure; after the file part nothing else would).
  req.on('aborted', () => parser.destroy(fail(ApiError.badRequest('the request body ended early'))));
  let started = false;
  return {
    file: () => {
      if (!started) {
        started = true;
        req.pipe(parser);
      }
      return filePromise;
    },
    end: () => ended,
    abandon: () => {
      req.unpipe(parser);
      req.resume();
    },
  };
}
