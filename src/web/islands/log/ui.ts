/**
 * The viewer's elements, replacing the server's fallback (the last lines in a `<pre>` and the
 * download link) inside `<section class="log-viewer">`: a bar (search box, previous / next, the
 * hit count, Follow, expand / collapse all, Download raw log), the scroller (`role="log"`, its
 * own announcements off: rows are reused as it scrolls), a status line and a polite status for
 * screen readers that the viewer fills at most every few seconds.
 */
export type Ui = {
  search: HTMLInputElement;
  prev: HTMLButtonElement;
  next: HTMLButtonElement;
  count: HTMLElement;
  follow: HTMLButtonElement;
  expand: HTMLButtonElement;
  collapse: HTMLButtonElement;
  scroller: HTMLDivElement;
  rows: HTMLDivElement;
  state: HTMLElement;
  announce: HTMLElement;
};

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<Record<string, string>> = {},
  ...children: Array<Node | string>
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) if (v !== undefined) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

export function buildUi(root: HTMLElement, raw: string, id: number): Ui {
  const q = `lv-q-${id}`;
  const search = el('input', {
    id: q,
    type: 'search',
    placeholder: 'Search the log',
    autocomplete: 'off',
    spellcheck: 'false',
    'aria-describedby': `lv-count-${id}`,
  });
  const prev = el(
    'button',
    { type: 'button', class: 'subtle', title: 'Previous match (Shift+Enter)' },
    'Previous',
  );
  const next = el('button', { type: 'button', class: 'subtle', title: 'Next match (Enter)' }, 'Next');
  const count = el('span', { id: `lv-count-${id}`, class: 'lv-count', 'aria-live': 'polite' });
  const follow = el('button', { type: 'button', class: 'lv-follow', 'aria-pressed': 'true' }, 'Follow');
  const expand = el('button', { type: 'button', class: 'subtle', hidden: '' }, 'Expand all');
  const collapse = el('button', { type: 'button', class: 'subtle', hidden: '' }, 'Collapse all');
  const download = el('a', { class: 'button subtle', href: raw, download: '' }, 'Download raw log');
  const rows = el('div', { class: 'lv-rows' });
  const scroller = el(
    'div',
    { class: 'lv-scroll', role: 'log', 'aria-live': 'off', 'aria-label': 'Step log', tabindex: '0' },
    el('div', { class: 'lv-window' }, rows),
    el('div', { class: 'lv-spacer' }),
  );
  const state = el('p', { class: 'lv-state' });
  const announce = el('p', { class: 'visually-hidden', role: 'status' });
  const bar = el(
    'div',
    { class: 'lv-bar' },
    el(
      'div',
      { class: 'lv-find', role: 'search' },
      el('label', { for: q, class: 'visually-hidden' }, 'Search the log'),
      search,
      prev,
      next,
      count,
    ),
    el('div', { class: 'lv-actions' }, follow, expand, collapse, download),
  );
  root.classList.add('lv', `lv-${id}`);
  root.replaceChildren(bar, scroller, state, announce);
  return { search, prev, next, count, follow, expand, collapse, scroller, rows, state, announce };
}
