/**
 * The thread that highlights larger files (highlight.js takes about 50 ms per 1,000 lines), so
 * the server's event loop never waits for it: `{id, text, lang}` in, `{id, value}` (highlight.js
 * markup) or `{id, error}` out.
 */
import { parentPort } from 'node:worker_threads';
import hljs from 'highlight.js';

type Job = { id: number; text: string; lang: string };

parentPort?.on('message', (job: Job) => {
  try {
    const value = hljs.highlight(job.text, { language: job.lang, ignoreIllegals: true }).value;
    parentPort?.postMessage({ id: job.id, value });
  } catch (e) {
    parentPort?.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e) });
  }
});
