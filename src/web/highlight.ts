/**
 * Syntax highlighting on the server (highlight.js), for file pages: the language comes from the
 * file's name (no auto-detection: it tries every grammar), the markup is split into lines (spans
 * open at a newline are closed there and opened again on the next line, so each line is a row of
 * its own), and kept by content in an LRU bounded by bytes. Files above the size cap are shown
 * as plain escaped lines. A larger file (above `SYNC_BYTES`) not kept yet is highlighted on a
 * worker thread, so the event loop goes on serving others: the page waits for it at most
 * `WAIT_MS`, then shows it plain while the worker finishes it for the next view.
 */
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import hljs from 'highlight.js';
import { ByteLru } from '../vcs/byte-lru.ts';
import { escapeHtml } from './html.ts';

/** Highlighting is off above these (plain lines). */
export const HIGHLIGHT_MAX_BYTES = 512 * 1024;
export const HIGHLIGHT_MAX_LINES = 20_000;
/** Larger files are highlighted on the worker thread (about 1 ms per KiB). */
const SYNC_BYTES = 32 * 1024;
/** How long a page waits for the worker before it shows the file plain. */
const WAIT_MS = 150;

/** Whole file names with a language of their own. */
const NAMES: Record<string, string> = {
  makefile: 'makefile',
  gnumakefile: 'makefile',
  dockerfile: 'dockerfile',
  containerfile: 'dockerfile',
  'cmakelists.txt': 'cmake',
  gemfile: 'ruby',
  rakefile: 'ruby',
  jenkinsfile: 'groovy',
  '.bashrc': 'bash',
  '.profile': 'bash',
  '.gitignore': 'plaintext',
  '.hgignore': 'plaintext',
};
/** Extensions whose highlight.js alias differs (the rest are aliases already: ts, py, rs, go...). */
const EXTENSIONS: Record<string, string> = {
  h: 'c',
  hh: 'cpp',
  cxx: 'cpp',
  hxx: 'cpp',
  cfg: 'ini',
  conf: 'ini',
  svg: 'xml',
  htm: 'xml',
  vue: 'xml',
  mts: 'typescript',
  cts: 'typescript',
  pyi: 'python',
  bzl: 'python',
  lock: 'plaintext',
  patch: 'diff',
};

let names: Set<string> | undefined;
/** highlight.js's language names and aliases (its own lookup would also find `constructor`). */
function known(): Set<string> {
  if (names === undefined) {
    names = new Set<string>();
    for (const n of hljs.listLanguages()) {
      names.add(n);
      for (const a of hljs.getLanguage(n)?.aliases ?? []) names.add(a);
    }
  }
  return names;
}

/** The highlight.js language of a file, by its name; undefined when none fits. */
export function languageOf(path: string): string | undefined {
  const name = (path.split('/').pop() ?? '').toLowerCase();
  // (own properties only: a file named `constructor` has no language)
  if (Object.hasOwn(NAMES, name)) return NAMES[name];
  const dot = name.lastIndexOf('.');
  if (dot <= 0 && !name.startsWith('.')) return undefined;
  const ext = name.slice(dot + 1);
  const lang = Object.hasOwn(EXTENSIONS, ext) ? EXTENSIONS[ext]! : ext;
  return known().has(lang) ? lang : undefined;
}

/** Escaped lines of `text` (a final newline does not start another line). */
export function plainLines(text: string): string[] {
  const lines = splitText(text);
  for (let i = 0; i < lines.length; i++) lines[i] = escapeHtml(lines[i]!);
  return lines;
}

function splitText(text: string): string[] {
  const lines = text.split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** highlight.js markup split at its newlines, each line with its open spans closed and reopened. */
export function splitMarkup(markup: string): string[] {
  const out: string[] = [];
  const open: string[] = [];
  let line = '';
  let last = 0;
  const token = /<span[^>]*>|<\/span>|\n/g;
  for (let m = token.exec(markup); m !== null; m = token.exec(markup)) {
    line += markup.slice(last, m.index);
    last = m.index + m[0].length;
    const t = m[0];
    if (t === '\n') {
      out.push(line + '</span>'.repeat(open.length));
      line = open.join('');
    } else if (t === '</span>') {
      open.pop();
      line += t;
    } else {
      open.push(t);
      line += t;
    }
  }
  line += markup.slice(last);
  out.push(line);
  // a final newline does not start another line
  if (out.length > 1 && out[out.length - 1] === open.join('')) out.pop();
  return out;
}

type Lines = { lines: string[]; highlighted: boolean };

const cache = new ByteLru<string, string[]>(64 * 1024 * 1024, (lines) => {
  let n = 64;
  for (const l of lines) n += 2 * l.length + 32;
  return n;
});
/** Highlighted markup of larger files, from the worker (one thread, started at the first use). */
class HighlightWorker {
  private worker: Worker | undefined;
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (v: string) => void; reject: (e: Error) => void }>();

  run(text: string, lang: string): Promise<string> {
    const worker = (this.worker ??= this.start());
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.postMessage({ id, text, lang });
    });
  }

  private start(): Worker {
    const w = new Worker(new URL('./highlight-worker.ts', import.meta.url));
    // idle, it keeps no process alive; a server's shutdown does not wait for it
    w.unref();
    w.on('message', (m: { id: number; value?: string; error?: string }) => {
      const p = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.value !== undefined) p?.resolve(m.value);
      else p?.reject(new Error(m.error ?? 'highlighting failed'));
    });
    const fail = (e: Error) => {
      this.worker = undefined;
      for (const p of this.waiting.values()) p.reject(e);
      this.waiting.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the highlighting thread exited (${code})`)));
    return w;
  }
}

const worker = new HighlightWorker();
/** Files being highlighted by the worker, by key (a second view waits for the same run). */
const running = new Map<string, Promise<string[] | undefined>>();

function highlightNow(text: string, lang: string): string[] {
  return splitMarkup(hljs.highlight(text, { language: lang, ignoreIllegals: true }).value);
}

/** The worker's lines for a larger file, kept once done; undefined when it failed. */
function highlightAside(key: string, text: string, lang: string): Promise<string[] | undefined> {
  let p = running.get(key);
  if (p === undefined) {
    p = worker
      .run(text, lang)
      .then((markup) => {
        const lines = splitMarkup(markup);
        cache.set(key, lines);
        return lines;
      })
      .catch(() => undefined)
      .finally(() => running.delete(key));
    running.set(key, p);
  }
  return p;
}

function lineCount(text: string): number {
  let n = 1;
  for (let i = text.indexOf('\n'); i >= 0 && n <= HIGHLIGHT_MAX_LINES + 1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * The lines of a text file as HTML (escaped, or highlight.js markup), one string per line; plain
 * when the language is unknown, the file above the cap, or large and not highlighted yet.
 */
export async function highlightLines(path: string, text: string): Promise<Lines> {
  const lang = languageOf(path);
  if (lang === undefined || lang === 'plaintext' || text.length > HIGHLIGHT_MAX_BYTES)
    return { lines: plainLines(text), highlighted: false };
  if (lineCount(text) > HIGHLIGHT_MAX_LINES) return { lines: plainLines(text), highlighted: false };
  const key = createHash('sha256').update(lang).update('\u0000').update(text).digest('base64url');
  const kept = cache.get(key);
  if (kept !== undefined) return { lines: kept, highlighted: true };
  if (text.length > SYNC_BYTES) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), WAIT_MS)));
    const lines = await Promise.race([highlightAside(key, text, lang), late]);
    clearTimeout(timer);
    return lines === undefined
      ? { lines: plainLines(text), highlighted: false }
      : { lines, highlighted: true };
  }
  const lines = highlightNow(text, lang);
  cache.set(key, lines);
  return { lines, highlighted: true };
}
