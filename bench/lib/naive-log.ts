/**
 * The naive step log page the benchmark compares the viewer with: one `<div>` per line, appended
 * as the stream brings it (SGR escapes dropped, the text set with `textContent`), the window kept
 * at the bottom. It reads the same live stream from its first byte, and tells its lines in its
 * title (`lines N`, `done`), which the benchmark reads from the browser process.
 */
function naive(): void {
  const g = globalThis as any;
  const root = g.document.querySelector('section.log-viewer');
  const box = g.document.createElement('div');
  box.className = 'naive-log';
  root.replaceChildren(box);
  let open = '';
  let lines = 0;
  const es = new g.EventSource(`${root.dataset.live}?offset=0`);
  es.addEventListener('log', (e: any) => {
    const parts = (open + JSON.parse(e.data)).split('\n');
    open = parts.pop() ?? '';
    const frag = g.document.createDocumentFragment();
    for (const line of parts) {
      const div = g.document.createElement('div');
      // eslint-disable-next-line no-control-regex
      div.textContent = line.replace(/\x1b\[[0-9;:]*[A-Za-z]/g, '');
      frag.append(div);
    }
    box.append(frag);
    lines += parts.length;
    g.document.title = `lines ${lines}`;
    g.document.scrollingElement.scrollTop = g.document.scrollingElement.scrollHeight;
  });
  es.addEventListener('done', () => {
    es.close();
    root.dataset.status = 'done';
    g.document.title = 'done';
  });
}

/** The script served at `/naive.js`. */
export const NAIVE_SCRIPT = `(${naive.toString()})();\n`;
