/**
 * Collapsed files of a changeset: their "Load diff" button (hidden until this script runs)
 * fetches the file's diff from the page's fragment route and puts it in place.
 */
for (const button of document.querySelectorAll<HTMLButtonElement>('button.load-diff[data-src]')) {
  button.hidden = false;
  button.addEventListener('click', () => {
    const body = button.closest<HTMLElement>('.diff-body');
    const src = button.dataset.src;
    if (body === null || src === undefined) return;
    button.disabled = true;
    button.textContent = 'Loading…';
    fetch(src, { headers: { accept: 'text/html' }, credentials: 'same-origin' })
      .then(async (res) => {
        // only Triad's own fragment of this file, never what a redirect led to
        if (!res.ok || res.redirected || res.headers.get('x-triad-fragment') !== '1') {
          throw new Error(`${res.status}`);
        }
        const markup = await res.text();
        const tpl = document.createElement('template');
        tpl.innerHTML = markup;
        body.replaceChildren(tpl.content);
        body.focus();
      })
      .catch(() => {
        button.disabled = false;
        button.textContent = 'Load diff (failed, try again)';
      });
  });
}
