/**
 * Line ranges on a file's page: a click on a line number selects that line (the link's own
 * `#L12`), a shift-click the range from the last selected line (`#L10-L20`); the range in the
 * address is marked on load and on every change of it, and scrolled to.
 */
const view = document.querySelector<HTMLElement>('[data-lines]');

function parse(hash: string): [number, number] | undefined {
  const m = /^#L(\d+)(?:-L(\d+))?$/.exec(hash);
  if (m === null) return undefined;
  const a = Number(m[1]);
  const b = m[2] === undefined ? a : Number(m[2]);
  return a <= b ? [a, b] : [b, a];
}

function mark(scroll: boolean): void {
  if (view === null) return;
  for (const el of view.querySelectorAll('.l.hl')) el.classList.remove('hl');
  const range = parse(location.hash);
  if (range === undefined) return;
  const [from, to] = range;
  for (let n = from; n <= to; n++) document.getElementById(`L${n}`)?.classList.add('hl');
  if (scroll) document.getElementById(`L${from}`)?.scrollIntoView({ block: 'center' });
}

if (view !== null) {
  let anchor: number | undefined = parse(location.hash)?.[0];
  view.addEventListener('click', (e) => {
    const link = (e.target as Element).closest<HTMLAnchorElement>('a.ln');
    if (link === null) return;
    const n = Number(link.hash.slice(2));
    e.preventDefault();
    const hash =
      e.shiftKey && anchor !== undefined && anchor !== n
        ? `#L${Math.min(anchor, n)}-L${Math.max(anchor, n)}`
        : `#L${n}`;
    if (!e.shiftKey || anchor === undefined) anchor = n;
    history.replaceState(null, '', hash);
    mark(false);
  });
  window.addEventListener('hashchange', () => {
    anchor = parse(location.hash)?.[0];
    mark(true);
  });
  mark(true);
}
