/**
 * Release asset uploads with progress: the upload form (a plain multipart form without script) is
 * sent with XMLHttpRequest to the same address with `?fragment=1`; its upload progress events
 * move a `<progress>` bar (percentage and bytes), "Cancel upload" aborts the request (the server
 * keeps nothing of it), and the answer, the release's new assets table, takes the old one's place.
 * A refusal's reason (a fragment too) is shown in the form's alert; a file over the size the
 * input names (`data-max-bytes`, the server's cap) is refused before anything is sent.
 */
const UNITS = ['KiB', 'MiB', 'GiB', 'TiB'];

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  let v = bytes / 1024;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${UNITS[i]}`;
}

/** The HTML of a fragment answer, as nodes (only Triad's own fragments are ever inserted). */
function nodes(markup: string): DocumentFragment {
  const tpl = document.createElement('template');
  tpl.innerHTML = markup;
  return tpl.content;
}

function wire(form: HTMLFormElement): void {
  const bar = form.querySelector<HTMLProgressElement>('[data-upload-progress] progress');
  const box = form.querySelector<HTMLElement>('[data-upload-progress]');
  const text = form.querySelector<HTMLElement>('[data-upload-text]');
  const status = form.querySelector<HTMLElement>('[data-upload-status]');
  const alert = form.querySelector<HTMLElement>('[data-upload-error]');
  const cancel = form.querySelector<HTMLButtonElement>('[data-upload-cancel]');
  const submit = form.querySelector<HTMLButtonElement>('button[type="submit"]');
  if (!bar || !box || !text || !status || !alert || !cancel || !submit) return;
  let xhr: XMLHttpRequest | undefined;

  const show = (loaded: number, total: number) => {
    const pct = total > 0 ? Math.floor((loaded / total) * 100) : 0;
    bar.value = pct;
    text.textContent = `${pct}% · ${size(loaded)} of ${size(total)}`;
  };
  const done = (message: string, error: boolean) => {
    xhr = undefined;
    submit.disabled = false;
    cancel.hidden = true;
    alert.hidden = !error;
    alert.textContent = error ? message : '';
    status.textContent = error ? '' : message;
  };

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (xhr !== undefined) return;
    const input = form.querySelector<HTMLInputElement>('input[type="file"]');
    const file = input?.files?.[0];
    const max = Number(input?.dataset.maxBytes);
    if (file !== undefined && Number.isFinite(max) && file.size > max) {
      done(`${file.name} is larger than the ${size(max)} a file may have; nothing was sent.`, true);
      return;
    }
    const url = new URL(form.action);
    url.searchParams.set('fragment', '1');
    const req = new XMLHttpRequest();
    xhr = req;
    req.open('POST', url.href);
    req.setRequestHeader('Accept', 'text/html');
    req.upload.addEventListener('progress', (ev) => {
      if (ev.lengthComputable) show(ev.loaded, ev.total);
    });
    req.addEventListener('load', () => {
      const fragment = req.getResponseHeader('x-triad-fragment') === '1';
      if (req.status === 201 && fragment) {
        show(1, 1);
        document.getElementById('assets-list')?.replaceWith(nodes(req.responseText));
        form.reset();
        done(`Uploaded ${file?.name ?? 'the file'}.`, false);
        return;
      }
      if (fragment) {
        const reason = (nodes(req.responseText).textContent ?? '').trim();
        done(`The upload failed (${req.status}): ${reason}`, true);
      } else if (new URL(req.responseURL, location.href).pathname === '/-/login') {
        done('You were signed out: sign in again, then upload the file once more.', true);
      } else {
        done(`The upload failed (${req.status}). Reload the page and try again.`, true);
      }
    });
    req.addEventListener('error', () => done('The upload failed: the connection broke.', true));
    req.addEventListener('abort', () => done('The upload was cancelled; nothing was kept.', false));
    submit.disabled = true;
    cancel.hidden = false;
    box.hidden = false;
    alert.hidden = true;
    status.textContent = `Uploading ${file?.name ?? 'the file'}…`;
    show(0, file?.size ?? 0);
    req.send(new FormData(form));
  });
  cancel.addEventListener('click', () => xhr?.abort());
}

for (const form of document.querySelectorAll<HTMLFormElement>('form[data-upload]')) wire(form);
