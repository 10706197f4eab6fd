/**
 * Copy buttons: a `<button data-copy="text" hidden>` (hidden until this script runs, since it does
 * nothing without it) copies its text to the clipboard and says so for a moment.
 */
for (const button of document.querySelectorAll<HTMLButtonElement>('button[data-copy]')) {
  button.hidden = false;
  const label = button.textContent ?? 'Copy';
  button.addEventListener('click', () => {
    const text = button.dataset.copy ?? '';
    const done = (message: string) => {
      button.textContent = message;
      setTimeout(() => (button.textContent = label), 1500);
    };
    navigator.clipboard.writeText(text).then(
      () => done('Copied'),
      () => done('Copy failed'),
    );
  });
}
