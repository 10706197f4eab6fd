/**
 * The step log viewer (issue 30): replaces the server's fallback in each
 * `<section class="log-viewer" data-live data-raw data-size data-status>` with a live, searchable
 * view of the whole log. See log/viewer.ts and docs/web.md ("Step logs"). The same script runs
 * as the viewer's worker (log/worker.ts), where there is no document.
 */
import { mountViewer } from './log/viewer.ts';
import { runWorker } from './log/worker.ts';

if (typeof document === 'undefined') runWorker(globalThis);
else for (const section of document.querySelectorAll<HTMLElement>('section.log-viewer')) mountViewer(section);
