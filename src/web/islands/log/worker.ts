/**
 * The viewer's worker: the same script as the page's island, started as a module worker (so the
 * page's `script-src 'self'` allows it). It keeps the browser's parsing of the event stream, the
 * JSON of each chunk, the Range reads and their decoding off the page's main thread, and posts
 * their text to the page, already cut into narrow and wide pieces (source.ts has the messages).
 */
import { splitWide, type Split } from './store.ts';
import { LiveStream, decodeHead, readHead } from './stream.ts';

/** What the page asks. */
export type ToWorker =
  | { t: 'open'; live: string; tail: number }
  | { t: 'head'; raw: string; end: number; chunk: number }
  | { t: 'ack' };

/** What the worker tells. */
export type FromWorker =
  | { t: 'begin'; offset: number; size: number }
  | { t: 'chunk'; split: Split; from: number; to: number }
  | { t: 'done'; status: string; exit_code: number | null; size: number }
  | { t: 'head'; split: Split; to: number }
  | { t: 'headDone' }
  | { t: 'headFailed' };

export type WorkerScope = {
  postMessage(m: FromWorker): void;
  addEventListener(type: 'message', fn: (e: MessageEvent<ToWorker>) => void): void;
};

/** Head chunks posted and not yet taken in by the page, at most. */
const AHEAD = 2;

export function runWorker(scope: WorkerScope): void {
  let unacked = 0;
  let wake: (() => void) | undefined;
  scope.addEventListener('message', (e) => {
    const m = e.data;
    if (m.t === 'open') {
      new LiveStream(m.live, m.tail, {
        begin: (offset, size) => scope.postMessage({ t: 'begin', offset, size }),
        // (cut here: narrow copies made off the page's thread stay narrow through postMessage)
        chunk: (text, from, to) => scope.postMessage({ t: 'chunk', split: splitWide(text), from, to }),
        done: (d) => scope.postMessage({ t: 'done', ...d }),
      }).open();
    } else if (m.t === 'head') {
      const decoder = new TextDecoder();
      readHead(m.raw, m.end, m.chunk, async (c) => {
        while (unacked >= AHEAD) await new Promise<void>((r) => (wake = r));
        unacked++;
        scope.postMessage({ t: 'head', split: decodeHead(c, decoder), to: c.to });
      }).then(
        () => scope.postMessage({ t: 'headDone' }),
        () => scope.postMessage({ t: 'headFailed' }),
      );
    } else {
      unacked--;
      wake?.();
      wake = undefined;
    }
  });
}
