/**
 * Pipelines that are still pending or running refresh themselves: every element with
 * `data-refresh` (the list's rows, a pipeline's summary) that holds something marked
 * `data-active` fetches its fragment again every 1.5 seconds (a change shows within 2) until nothing in it is active.
 * Selection boxes keep their state across a refresh.
 */
const EVERY_MS = 1500;

function keepChecked(el: HTMLElement): Set<string> {
  return new Set(
    [...el.querySelectorAll<HTMLInputElement>('input[type=checkbox]:checked')].map((b) => b.value),
  );
}

function refresh(el: HTMLElement): void {
  const src = el.dataset.refresh;
  if (src === undefined) return;
  const tick = async () => {
    if (el.querySelector('[data-active]') === null && !el.hasAttribute('data-active')) return;
    try {
      const res = await fetch(src, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
      // only Triad's own fragment, never what a redirect led to
      if (res.ok && !res.redirected && res.headers.get('x-triad-fragment') === '1') {
        const checked = keepChecked(el);
        const tpl = document.createElement('template');
        tpl.innerHTML = await res.text();
        const hadFocus = el.contains(document.activeElement);
        el.replaceChildren(tpl.content);
        for (const b of el.querySelectorAll<HTMLInputElement>('input[type=checkbox]')) {
          b.checked = checked.has(b.value);
        }
        if (hadFocus) el.focus();
      }
    } catch {
      // the next tick tries again
    }
    setTimeout(() => void tick(), EVERY_MS);
  };
  setTimeout(() => void tick(), EVERY_MS);
}

for (const el of document.querySelectorAll<HTMLElement>('[data-refresh]')) refresh(el);
