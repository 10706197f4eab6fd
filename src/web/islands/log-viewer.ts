/**
 * The step log viewer (issue 30): replaces the server's fallback in each
 * `<section class="log-viewer" data-live data-raw data-size data-status>` with a live, searchable
 * view of the whole log. See log/viewer.ts and docs/web.md ("Step logs").
 */
import { mountViewer } from './log/viewer.ts';

for (const section of document.querySelectorAll<HTMLElement>('section.log-viewer')) mountViewer(section);
