/**
 * The files browsers load besides pages: the stylesheet (every `styles/*.css`, in name order, with
 * highlight.js's themes), the script islands (each `islands/<name>.ts` bundled on its own, as an
 * ES module) and the icon. esbuild builds them once per process, at the first use (about 0.1 s),
 * into memory; each is served at `/-/assets/<name>-<hash>.<ext>` under a name that changes with
 * its content, so browsers may keep it forever (`immutable`).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

export type Asset = { name: string; type: string; body: Buffer; etag: string };

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ISLANDS = path.join(HERE, 'islands');
const STYLES = path.join(HERE, 'styles');

const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#3b4cca"/><path d="M16 6 26 24H6Z" fill="none" stroke="#fff" stroke-width="3" stroke-linejoin="round"/><circle cx="16" cy="6" r="3" fill="#fff"/><circle cx="26" cy="24" r="3" fill="#fff"/><circle cx="6" cy="24" r="3" fill="#fff"/></svg>`;

export class Assets {
  /** Served file name -> asset. */
  private readonly byFile = new Map<string, Asset>();
  /** Logical name (`triad.css`, `copy.js`, `icon.svg`) -> served file name. */
  private readonly names = new Map<string, string>();

  constructor() {
    const add = (logical: string, type: string, body: Buffer) => {
      const hash = createHash('sha256').update(body).digest('base64url').slice(0, 12);
      const ext = path.extname(logical);
      const file = `${path.basename(logical, ext)}-${hash}${ext}`;
      this.byFile.set(file, { name: file, type, body, etag: `"${hash}"` });
      this.names.set(logical, file);
    };
    const styles = fs
      .readdirSync(STYLES)
      .filter((f) => f.endsWith('.css'))
      .sort();
    const css = buildSync({
      stdin: {
        contents: styles.map((f) => `@import "./${f}";`).join('\n'),
        resolveDir: STYLES,
        loader: 'css',
      },
      bundle: true,
      minify: true,
      write: false,
      logLevel: 'silent',
    });
    add('triad.css', 'text/css; charset=utf-8', Buffer.from(css.outputFiles[0]!.contents));
    const islands = fs
      .readdirSync(ISLANDS)
      .filter((f) => f.endsWith('.ts'))
      .sort();
    const js = buildSync({
      entryPoints: islands.map((f) => path.join(ISLANDS, f)),
      bundle: true,
      minify: true,
      format: 'esm',
      target: 'es2022',
      outdir: '/islands',
      write: false,
      logLevel: 'silent',
    });
    for (const out of js.outputFiles) {
      add(path.basename(out.path), 'text/javascript; charset=utf-8', Buffer.from(out.contents));
    }
    add('icon.svg', 'image/svg+xml', Buffer.from(ICON));
  }

  /** The URL of a logical asset (`triad.css`, `<island>.js`, `icon.svg`); throws for an unknown one. */
  url(logical: string): string {
    const file = this.names.get(logical);
    if (file === undefined) throw new Error(`no asset ${logical}`);
    return `/-/assets/${file}`;
  }

  get(file: string): Asset | undefined {
    return this.byFile.get(file);
  }
}

let built: Assets | undefined;

/** The assets of this process (built at the first call). */
export function assets(): Assets {
  return (built ??= new Assets());
}
