/**
 * A merge box whose mergeability is still being checked (`data-recheck`: the URL of its
 * fragment) is loaded again every few seconds until the check has an answer; the box keeps its
 * place (a live region), only its content changes. Without script its "Check again" link does
 * the same by hand.
 */
const MAX_TRIES = 40;

function recheck(box: HTMLElement, tries: number): void {
  const src = box.dataset.recheck;
  if (src === undefined || tries >= MAX_TRIES) return;
  setTimeout(
    () => {
      fetch(src, { headers: { accept: 'text/html' }, credentials: 'same-origin' })
        .then(async (res) => {
          // only Triad's own fragment, never what a redirect led to
          if (!res.ok || res.redirected || res.headers.get('x-triad-fragment') !== '1') {
            throw new Error(`${res.status}`);
          }
          const tpl = document.createElement('template');
          tpl.innerHTML = await res.text();
          const next = tpl.content.querySelector<HTMLElement>('section.merge-box');
          if (next === null) {
            // no longer open (merged or closed meanwhile): the page says what happened
            window.location.reload();
            return;
          }
          box.className = next.className;
          box.replaceChildren(...next.childNodes);
          if (next.dataset.recheck === undefined) delete box.dataset.recheck;
          else recheck(box, tries + 1);
        })
        .catch(() => recheck(box, tries + 1));
    },
    Math.min(1000 + tries * 250, 4000),
  );
}

for (const box of document.querySelectorAll<HTMLElement>('section.merge-box[data-recheck]')) recheck(box, 0);
