import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';

/**
 * Conditional reads (RFC 9110): a strong `ETag` made from what decides the bytes of a response
 * (a resolved commit or file id, and what else shapes them, such as an archive's format), never
 * from the revision as asked (`main` moves; its resolved commit does not).
 */
export function strongEtag(...parts: (string | number)[]): string {
  return `"${createHash('sha256').update(parts.join('\u0000')).digest('base64url').slice(0, 32)}"`;
}

/**
 * Sets `ETag` (and `Cache-Control: private, no-cache`: a client may keep the answer, and asks
 * again each time) and tells whether the client's copy is current: a GET or HEAD whose
 * `If-None-Match` lists this tag (compared weakly, RFC 9110 13.1.2) or is `*`; the handler then
 * answers `reply.notModified()`. (Not express's `req.fresh`: it ignores `If-None-Match` when the
 * request says `Cache-Control: no-cache`, which fetch adds to every conditional request.)
 */
export function unchanged(req: Request, res: Response, etag: string): boolean {
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', 'private, no-cache');
  const header = req.headers['if-none-match'];
  if ((req.method !== 'GET' && req.method !== 'HEAD') || header === undefined) return false;
  if (header.trim() === '*') return true;
  const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);
  return (header.match(/(?:W\/)?"[^"]*"/g) ?? []).some((tag) => opaque(tag) === opaque(etag));
}
