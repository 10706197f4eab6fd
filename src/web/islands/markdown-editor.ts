/**
 * Markdown editors (views/markdown-editor.ts): shows their Write and Preview buttons (hidden
 * until this script runs); Preview sends the text with the form's token to the editor's preview
 * address and shows the server's rendering in place of the textarea, Write brings the textarea
 * back. Only Triad's own fragment is put in the page.
 */
for (const editor of document.querySelectorAll<HTMLElement>('.md-editor[data-preview]')) {
  const modes = editor.querySelector<HTMLElement>('.md-modes');
  const textarea = editor.querySelector<HTMLTextAreaElement>('textarea');
  const preview = editor.querySelector<HTMLElement>('.md-preview');
  const write = editor.querySelector<HTMLButtonElement>('button[data-mode="write"]');
  const show = editor.querySelector<HTMLButtonElement>('button[data-mode="preview"]');
  const src = editor.dataset.preview;
  if (!modes || !textarea || !preview || !write || !show || src === undefined) continue;
  modes.hidden = false;
  let asked = 0;
  const mode = (previewing: boolean) => {
    textarea.hidden = previewing;
    preview.hidden = !previewing;
    write.setAttribute('aria-pressed', String(!previewing));
    show.setAttribute('aria-pressed', String(previewing));
  };
  write.addEventListener('click', () => {
    mode(false);
    textarea.focus();
  });
  show.addEventListener('click', () => {
    const token = textarea.form?.querySelector<HTMLInputElement>('input[name="_csrf"]')?.value ?? '';
    const mine = ++asked;
    preview.textContent = 'Loading the preview…';
    mode(true);
    fetch(src, {
      method: 'POST',
      body: new URLSearchParams({ _csrf: token, text: textarea.value }),
      headers: { accept: 'text/html' },
      credentials: 'same-origin',
    })
      .then(async (res) => {
        if (mine !== asked) return;
        // only Triad's own fragment, never what a redirect (to sign in) led to
        if (res.redirected || res.headers.get('x-triad-fragment') !== '1') {
          throw new Error(`${res.status}`);
        }
        const tpl = document.createElement('template');
        tpl.innerHTML = await res.text();
        if (mine === asked) preview.replaceChildren(tpl.content);
      })
      .catch((e: unknown) => {
        if (mine !== asked) return;
        preview.textContent = `The preview failed (${e instanceof Error ? e.message : 'no answer'}). Your text is kept: choose Write to go on.`;
      });
  });
}
