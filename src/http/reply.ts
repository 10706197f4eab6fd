import type { Page } from './pagination.ts';
import type { StreamReply } from './stream-reply.ts';

/**
 * What a handler returns; `send` turns it into the response. `T` is the type of the route's
 * declared response schema, so a handler cannot return something its document does not describe.
 */
export type Reply<T> =
  | { kind: 'data'; status: 200 | 201 | 202; data: T }
  | { kind: 'list'; page: Page<T> }
  | { kind: 'bare'; status: 200 | 201; body: T }
  | { kind: 'empty' }
  | { kind: 'notModified' }
  | ({ kind: 'stream' } & StreamReply)
  | { kind: 'handled' };

export const reply = {
  ok: <T>(data: T): Reply<T> => ({ kind: 'data', status: 200, data }),
  created: <T>(data: T): Reply<T> => ({ kind: 'data', status: 201, data }),
  /** 202: the work was queued (it happens after the response). */
  accepted: <T>(data: T): Reply<T> => ({ kind: 'data', status: 202, data }),
  bare: <T>(body: T, status: 200 | 201 = 200): Reply<T> => ({ kind: 'bare', status, body }),
  list: <T>(page: Page<T>): Reply<T> => ({ kind: 'list', page }),
  noContent: (): Reply<never> => ({ kind: 'empty' }),
  /** 304 without a body: the client's copy is current (`unchanged`, a route with `etag`). */
  notModified: (): Reply<never> => ({ kind: 'notModified' }),
  /**
   * 200 with these headers and the body read from `body` (a `text` route). With `handOff` (a
   * process that writes the body to the response's connection itself, `OpenedFile.handOff`), it is
   * used instead of `body` when, the headers sent, nothing else is queued on the socket; the
   * headers must then include Content-Length.
   */
  stream: (
    headers: Record<string, string>,
    body: AsyncIterable<Uint8Array>,
    handOff?: () => Promise<void>,
  ): Reply<never> => ({ kind: 'stream', headers, body, handOff }),
  /** The handler wrote the response itself (streams, plain text). */
  handled: (): Reply<never> => ({ kind: 'handled' }),
};
