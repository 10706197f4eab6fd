/**
 * A release's files: the assets table (size, digest, downloads, links through the session's
 * download route) and the upload form, a plain multipart form that the `upload` island sends
 * with a progress bar instead.
 */
import type { AssetJson, ReleaseJson } from '../../releases/schemas.ts';
import type { FormState } from '../context.ts';
import { html, type Html } from '../html.ts';
import { urls } from '../urls.ts';
import { timeAgo } from './common.ts';
import { fileSize } from './code/files.ts';
import { csrf, formError, input } from './forms.ts';

/** Where the assets table sits: the island puts the table of its upload's answer in its place. */
export const ASSETS_LIST_ID = 'assets-list';

function uploader(a: AssetJson): Html {
  return a.uploader === null
    ? html`<span class="muted">a deleted user</span>`
    : html`<a href="${urls.user(a.uploader.username)}">${a.uploader.username}</a>`;
}

/** The assets of a release (`canWrite`: with a delete link each), inside its replaceable box. */
export function assetsList(org: string, repo: string, r: ReleaseJson, canWrite: boolean): Html {
  const rows = r.assets.map((a) => {
    const shown = a.label === '' ? a.name : a.label;
    const del = canWrite
      ? html`<a href="${urls.releaseAssetDelete(org, repo, r.id, a.id)}" aria-label="Delete ${a.name}">Delete</a>`
      : '';
    return html`<tr>
<th scope="row"><a class="asset-name break" href="${urls.releaseAsset(org, repo, r.id, a.id)}" download>${shown}</a>${a.label === '' ? '' : html`<br><span class="muted break">${a.name}</span>`}</th>
<td class="size" title="${a.size} bytes">${fileSize(a.size)}</td>
<td><code class="digest break">${a.digest}</code></td>
<td class="downloads">${a.download_count}</td>
<td>${timeAgo(a.created_at)} by ${uploader(a)}</td>
${canWrite ? html`<td>${del}</td>` : ''}
</tr>`;
  });
  const table =
    r.assets.length === 0
      ? html`<p class="empty">No files were uploaded to this release.</p>`
      : html`<div class="table-scroll"><table class="list assets">
<thead><tr><th scope="col">File</th><th scope="col">Size</th><th scope="col">Digest</th><th scope="col">Downloads</th><th scope="col">Uploaded</th>${canWrite ? html`<th scope="col"><span class="visually-hidden">Action</span></th>` : ''}</tr></thead>
<tbody>${rows}</tbody>
</table></div>`;
  return html`<div id="${ASSETS_LIST_ID}">${table}</div>`;
}

/**
 * The upload form. The form token comes first, so the server checks it before the file arrives;
 * without script it is an ordinary multipart form, and the `upload` island shows the progress
 * bar and the cancel button it holds hidden.
 */
export function uploadForm(
  org: string,
  repo: string,
  r: ReleaseJson,
  formToken: string,
  state: FormState,
  maxBytes: number,
): Html {
  return html`<section class="upload card" aria-labelledby="upload-h">
<h2 id="upload-h">Upload a file</h2>
${formError(state)}
<form method="post" action="${urls.release(org, repo, r.id, 'assets')}" enctype="multipart/form-data" data-upload>
${csrf(formToken)}
<div class="field">
<label for="f-attachment">File</label>
<input id="f-attachment" type="file" name="attachment" required aria-describedby="f-attachment-hint" data-max-bytes="${maxBytes}">
<p class="hint" id="f-attachment-hint">At most ${fileSize(maxBytes)}.</p>
</div>
${input({ name: 'name', label: 'Name (optional)', maxlength: 255, hint: 'The file name when empty.' }, state)}
${input({ name: 'label', label: 'Label (optional)', maxlength: 1000, hint: 'Shown instead of the name.' }, state)}
<div class="actions">
<button type="submit" class="primary">Upload</button>
<button type="button" class="secondary" data-upload-cancel hidden>Cancel upload</button>
</div>
<div class="upload-progress" data-upload-progress hidden>
<progress max="100" value="0" aria-label="Upload progress"></progress>
<span data-upload-text></span>
</div>
<p class="upload-status" role="status" data-upload-status></p>
<p class="flash error" role="alert" data-upload-error hidden></p>
</form>
</section>`;
}
