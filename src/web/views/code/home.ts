/** The repository home's pieces: the clone box, the first-push steps of an empty repository, the last commit. */
import type { RepoJson } from '../../../repos/schemas.ts';
import type { LogEntry } from '../../../vcs/reader.ts';
import { html, type Html } from '../../html.ts';
import { urls } from '../../urls.ts';
import { timeAgo } from '../common.ts';

function cloneCommand(repo: RepoJson): string {
  switch (repo.vcs) {
    case 'git':
      return `git clone ${repo.clone_url}`;
    case 'hg':
      return `hg clone ${repo.clone_url}`;
    case 'fossil':
      return `fossil clone ${repo.clone_url} ${repo.name}.fossil`;
  }
}

const TOKEN_NOTE = html`<p class="hint">When the client asks for a password, give an <a href="/-/settings/tokens">access token</a>; the user name is your own.</p>`;

/** The clone URL in a read-only field with a copy button, and the command of the repository's kind. */
export function cloneBox(repo: RepoJson): Html {
  const cmd = cloneCommand(repo);
  return html`<section class="clone card" aria-labelledby="clone-h">
<h2 id="clone-h">Clone</h2>
<div class="field">
<label for="clone-url">Clone URL</label>
<div class="copy-row">
<input id="clone-url" type="text" readonly value="${repo.clone_url}">
<button type="button" class="secondary" data-copy="${repo.clone_url}" hidden>Copy</button>
</div>
</div>
<pre class="commands"><code>${cmd}</code></pre>
${TOKEN_NOTE}
</section>`;
}

function firstPush(repo: RepoJson): string {
  const url = repo.clone_url;
  switch (repo.vcs) {
    case 'git':
      return [
        `git init -b ${repo.default_branch}`,
        'git add .',
        'git commit -m "First commit"',
        `git remote add origin ${url}`,
        `git push -u origin ${repo.default_branch}`,
      ].join('\n');
    case 'hg':
      return ['hg init', 'hg add', 'hg commit -m "First commit"', `hg push ${url}`].join('\n');
    case 'fossil':
      return [
        `fossil clone ${url} ${repo.name}.fossil`,
        `mkdir ${repo.name} && cd ${repo.name}`,
        `fossil open ../${repo.name}.fossil`,
        'fossil add .',
        'fossil commit -m "First commit"',
        '# autosync sends the check-in; else: fossil push',
      ].join('\n');
  }
}

/** What an empty repository shows: the first-push commands of its kind. */
export function emptyRepo(repo: RepoJson): Html {
  return html`<section class="empty-repo card" aria-labelledby="empty-h">
<h2 id="empty-h">This repository is empty</h2>
<p>Push a first commit to it from a new working copy:</p>
<pre class="commands"><code>${firstPush(repo)}</code></pre>
${TOKEN_NOTE}
</section>`;
}

/** The newest commit of a line: subject, author, time, id, each leading to the changeset. */
export function lastCommit(org: string, repo: string, c: LogEntry): Html {
  const href = urls.changeset(org, repo, c.id);
  return html`<div class="last-commit">
<a class="subject" href="${href}">${c.subject === '' ? '(no message)' : c.subject}</a>
<span class="meta"><span class="author">${c.author}</span> committed ${timeAgo(c.date)} · <a class="sha" href="${href}" aria-label="Commit ${c.short_id}">${c.short_id}</a></span>
</div>`;
}

/** Links to the source archives of a revision. */
export function archiveLinks(org: string, repo: string, rev: string): Html {
  return html`<span class="archives">Download <a href="${urls.archive(org, repo, rev, 'zip')}">ZIP</a> · <a href="${urls.archive(org, repo, rev, 'tar.gz')}">tar.gz</a></span>`;
}
