import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { freePort } from '../../src/db/database.ts';
import { Client } from '../helpers/server.ts';
import { exited, Processes, ROOT, stderrMatch, waitReady, type Proc } from '../helpers/process.ts';

/*
 * docs/getting-started.md, run as a reader runs it. The test takes the page's ```sh blocks (and the
 * receiver samples of its ```python and ```js blocks) and runs them in order in ONE bash session
 * (the reader's second terminal: variables, functions and the current directory carry over from
 * block to block), against a server started with `npm start` as the page says. The page and the
 * test therefore cannot drift: a command that stops working fails this test.
 *
 * What the test changes, and only this (literal replacements in the blocks it runs):
 *   - `localhost:3000` becomes `localhost:<a free port>`, the server's port (`PORT`);
 *   - `8808`, the webhook receiver's port, becomes another free port;
 *   - the server's data directory is a temporary one (`TRIAD_DATA_DIR`), not `./data`, and a
 *     pull request read waits for its check (`TRIAD_PULL_CHECK_BUDGET_MS`, as the page allows);
 *   - the session's HOME is a temporary directory holding only the reader's Git identity (the
 *     page's prerequisite), so the page's `~/.hgrc`, `git config --global` and credential cache
 *     touch nothing of this machine; USER is set as a login shell sets it (Fossil needs it).
 *
 * HTML comments `<!-- test: <kind> ... -->` in the page's source (invisible when rendered) mark
 * the few blocks a test cannot run as written, each with the reason:
 *   - `server-start`: starting the server (the first terminal). The test does not run the block
 *     (`git clone <the Triad repository>`, `npm ci` cannot run here); it runs `npm start` in this
 *     checkout with the variables written before `npm start` in the block, after stopping a
 *     running server as Ctrl-C does. The token the first start prints is the one pasted below.
 *   - `server-dir`: a command for the first terminal, in the checkout (`npm run triad -- ...`): run
 *     in a subshell there, with the server's TRIAD_DATA_DIR.
 *   - `stdin-token`: the block reads the token from the keyboard (`read -rs`); its input is the
 *     token the first start printed, as if pasted.
 *   - `alternative`: another way to do what the block before did (section 4's option B): run in a
 *     subshell in an empty directory, so that it changes nothing the following blocks rely on.
 *   - `until <command>`: what a reader waits for before the next block ("a few seconds later"):
 *     the session runs <command> until it succeeds (at most a minute).
 *   - `file <name>`: the next block is a file the page asks to save: written as <name> in the
 *     session's current directory.
 */

const PAGE = path.join(ROOT, 'docs/getting-started.md');
const WAIT_LIMIT_S = 60;
const BLOCK_LIMIT_MS = 120_000;

const KINDS = ['server-start', 'server-dir', 'stdin-token', 'alternative', 'until', 'file'];

type Mark = { kind: string; arg: string };
type Block = { lang: string; code: string; line: number; marks: Mark[] };

/** The fenced blocks of the page, each with the `<!-- test: ... -->` comments right before it. */
function blocksOf(text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  let marks: Mark[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const mark = /^<!-- test: (\S+)(?: (.*?))? -->$/.exec(line);
    if (mark !== null) {
      if (!KINDS.includes(mark[1]!)) throw new Error(`${PAGE}:${i + 1}: unknown test mark ${mark[1]}`);
      marks.push({ kind: mark[1]!, arg: mark[2] ?? '' });
      continue;
    }
    const fence = /^```(\S*)\s*$/.exec(line);
    if (fence !== null) {
      const start = i;
      const code: string[] = [];
      for (i++; i < lines.length && lines[i] !== '```'; i++) code.push(lines[i]!);
      blocks.push({ lang: fence[1]!, code: code.join('\n'), line: start + 1, marks });
      marks = [];
      continue;
    }
    if (line.trim() !== '' && marks.length > 0) {
      throw new Error(`${PAGE}:${i + 1}: a test mark must be followed by a code block`);
    }
  }
  return blocks;
}

const procs = new Processes();
let session: ChildProcess | undefined;
let sessionEnv: NodeJS.ProcessEnv = {};
let server: Proc | undefined;
afterAll(async () => {
  // After a failure the server may still run. `npm start` runs it below npm (npm, then node), so
  // it is stopped through its process group: Ctrl-C first, then SIGKILL for what is left.
  if (server?.child.pid !== undefined) {
    const group = -server.child.pid;
    const alive = () => {
      try {
        process.kill(group, 0);
        return true;
      } catch {
        return false;
      }
    };
    if (alive()) process.kill(group, 'SIGINT');
    for (let i = 0; i < 300 && alive(); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    if (alive()) process.kill(group, 'SIGKILL');
  }
  if (session?.pid !== undefined) {
    // the credential cache daemon of section 4 (option B) lives in the session's HOME
    await new Promise((resolve) =>
      spawn('git', ['credential-cache', 'exit'], { env: sessionEnv, stdio: 'ignore' }).once('exit', resolve),
    );
    try {
      process.kill(-session.pid, 'SIGKILL'); // the session and what it left running (receivers)
    } catch {
      // gone already
    }
  }
  await procs.cleanup();
});

/** A bash session fed the page's blocks one at a time, with its output (stdout and stderr merged). */
class Session {
  private out = '';
  private seq = 0;
  readonly child: ChildProcess;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--noprofile', '--norc', '-s'], {
      cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    this.child.stdout!.on('data', (b: Buffer) => (this.out += b.toString()));
    this.child.stderr!.on('data', (b: Buffer) => (this.out += b.toString()));
    // Every failing command is reported (set -E: in subshells too), the session goes on as a
    // terminal would; the test fails on any report.
    this.child.stdin!.write(
      `exec 2>&1\nset -E\ntrap 'printf "\\n@@err %s: %s@@\\n" "$?" "$BASH_COMMAND"' ERR\n`,
    );
  }

  /** Runs `script` and answers its output and the status of its last command. */
  async run(script: string): Promise<{ output: string; status: number }> {
    const id = ++this.seq;
    const from = this.out.length;
    this.child.stdin!.write(`${script}\nprintf '\\n@@done ${id} %d@@\\n' "$?"\n`);
    const done = new RegExp(`\\n@@done ${id} (\\d+)@@\\n`);
    const started = Date.now();
    for (;;) {
      const m = done.exec(this.out.slice(from));
      if (m !== null) return { output: this.out.slice(from, from + m.index), status: Number(m[1]) };
      if (this.child.exitCode !== null) throw new Error(`the session ended:\n${this.out.slice(from)}`);
      if (Date.now() - started > BLOCK_LIMIT_MS) throw new Error(`timed out:\n${this.out.slice(from)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** `NAME=value` words the block writes before `npm start`. */
function startEnv(code: string): Record<string, string> {
  const m = /^((?:[A-Z][A-Z0-9_]*=\S*\s+)*)npm start\s*$/m.exec(code.replace(/^.*&&\s*(?=npm start)/m, ''));
  if (m === null) throw new Error(`no \`npm start\` in the server-start block:\n${code}`);
  return Object.fromEntries(
    m[1]!
      .trim()
      .split(/\s+/)
      .filter((w) => w !== '')
      .map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
  );
}

/** Ctrl-C in the server's terminal: SIGINT to its process group. */
async function ctrlC(p: Proc): Promise<void> {
  process.kill(-p.child.pid!, 'SIGINT');
  expect(await exited(p.child)).toEqual({ code: 0, signal: null });
  expect(p.output()).toContain('shutdown complete');
}

type Ran = { block: Block; output: string; status: number };

describe('docs/getting-started.md', () => {
  test('when its commands run in order against a freshly started server, then every one succeeds and the reader sees what the page promises: pull requests merged in each kind, the release file downloaded unchanged, webhooks verified by both receiver samples', async () => {
    const page = await fs.readFile(PAGE, 'utf8');
    const blocks = blocksOf(page);
    const root = await procs.tempDir('triad-getting-started-');
    const dataDir = path.join(root, 'data');
    const home = path.join(root, 'home');
    const work = path.join(root, 'work');
    await fs.mkdir(home);
    await fs.mkdir(work);
    // the page's prerequisite: Git knows who you are
    await fs.writeFile(
      path.join(home, '.gitconfig'),
      '[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n',
    );
    const port = await freePort();
    const receiverPort = await freePort();
    const url = `http://localhost:${port}`;
    const rewrite = (s: string) =>
      s.replaceAll('localhost:3000', `localhost:${port}`).replaceAll('8808', String(receiverPort));

    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (/^(TRIAD_|GIT_|HG|XDG_|DATABASE_URL$|NODE_OPTIONS$|PORT$|EMAIL$)/.test(k)) continue;
      env[k] = v;
    }
    sessionEnv = { ...env, HOME: home, USER: os.userInfo().username, LOGNAME: os.userInfo().username };
    const sh = new Session(work, sessionEnv);
    session = sh.child;

    let token = '';
    const ran: Ran[] = [];
    const runnable = blocks.filter((b) => b.lang === 'sh' || b.marks.some((m) => m.kind === 'file'));
    // what the test relies on: the page starts the server twice (the second time for webhooks),
    // has both receiver samples, and uses the port and the receiver port the test replaces
    const marked = (kind: string) => runnable.filter((b) => b.marks.some((m) => m.kind === kind));
    expect(runnable.filter((b) => b.lang === 'sh').length).toBeGreaterThanOrEqual(25);
    expect(marked('server-start')).toHaveLength(2);
    expect(marked('stdin-token')).toHaveLength(1);
    expect(marked('file').map((b) => [b.lang, b.marks.find((m) => m.kind === 'file')!.arg])).toEqual([
      ['python', 'receiver.py'],
      ['js', 'receiver.mjs'],
    ]);
    const all = runnable.map((b) => b.code).join('\n');
    expect(all).toContain('localhost:3000');
    expect(all).toContain('127.0.0.1:8808');

    for (const block of runnable) {
      const where = `docs/getting-started.md:${block.line}`;
      const kinds = new Set(block.marks.map((m) => m.kind));
      for (const m of block.marks.filter((x) => x.kind === 'until')) {
        const wait = await sh.run(
          `__waited=0; until ${rewrite(m.arg)}; do __waited=$((__waited+1)); if [ "$__waited" -ge ${WAIT_LIMIT_S * 5} ]; then echo "@@timeout@@"; break; fi; sleep 0.2; done`,
        );
        expect([where, m.arg, wait.output]).toEqual([
          where,
          m.arg,
          expect.not.stringContaining('@@timeout@@'),
        ]);
      }

      if (kinds.has('server-start')) {
        if (server !== undefined) {
          // the refusal the page quotes for a loopback target, before the restart that allows it
          const quoted = /`(refused: 127\.0\.0\.1 [^`]*)`/.exec(page.replace(/\s+/g, ' '))?.[1];
          expect(quoted).toBeDefined();
          const refused = await new Client(url, token).post('/api/v1/repos/acme/hello-git/webhooks', {
            url: `http://127.0.0.1:${receiverPort}/`,
            events: ['push'],
          });
          expect(refused.status).toBe(400);
          expect(refused.body.error.message).toContain(quoted);
          await ctrlC(server);
        }
        const first = server === undefined;
        server = procs.serve(
          {
            ...startEnv(block.code),
            PORT: String(port),
            TRIAD_DATA_DIR: dataDir,
            // the page reads each pull request once; on a loaded machine the check can take longer
            // than the default 400 ms a read waits (the page says to read again then)
            TRIAD_PULL_CHECK_BUDGET_MS: '60000',
          },
          { detached: true, npmStart: true },
        );
        await waitReady(server, url);
        if (first) {
          const printed = await stderrMatch(
            server,
            /first start\. Created the administrator "admin"\.[\s\S]*?\n {3}(\S+)\n/,
          );
          expect(printed).not.toBeNull();
          token = printed![1]!;
        } else {
          expect(server.output()).not.toContain('first start');
        }
        ran.push({ block, output: '', status: 0 });
        continue;
      }

      let script: string;
      const code = rewrite(block.code);
      if (kinds.has('file')) {
        const name = block.marks.find((m) => m.kind === 'file')!.arg;
        script = `cat > ${name} <<'__GETTING_STARTED_EOF__'\n${code}\n__GETTING_STARTED_EOF__`;
      } else if (kinds.has('server-dir')) {
        script = `( cd ${JSON.stringify(ROOT)} && export TRIAD_DATA_DIR=${JSON.stringify(dataDir)} && {\n${code}\n} ) </dev/null`;
      } else if (kinds.has('alternative')) {
        const dir = path.join(root, `alternative-${block.line}`);
        script = `( mkdir ${JSON.stringify(dir)} && cd ${JSON.stringify(dir)} && {\n${code}\n} ) </dev/null`;
      } else if (kinds.has('stdin-token')) {
        const pasted = path.join(root, 'pasted-token');
        await fs.writeFile(pasted, `${token}\n`, { mode: 0o600 });
        script = `{\n${code}\n} < ${JSON.stringify(pasted)}`;
      } else {
        script = `{\n${code}\n} </dev/null`;
      }
      const r = await sh.run(script);
      ran.push({ block, ...r });
      // what a reader would notice at once: a command that failed, an API error answer
      expect([where, r.output]).toEqual([where, expect.not.stringMatching(/@@err |"error":\{"code"/)]);
      expect([where, r.status, r.output]).toEqual([where, 0, r.output]);
    }

    /** The output of the one block whose code holds every one of `parts`. */
    const out = (...parts: string[]): string => {
      const found = ran.filter((r) => parts.every((p) => r.block.code.includes(p)));
      expect([parts, found.length]).toEqual([parts, 1]);
      return found[0]!.output;
    };

    // 1–2: the printed token works; another one can be minted while the server runs
    expect(token).toMatch(/^triad_[0-9a-f]+$/);
    const minted = /\b(triad_[0-9a-f]{20,})\b/.exec(out('admin token create'))?.[1];
    expect(minted).toBeDefined();
    expect(minted).not.toBe(token);
    expect(out('read -rs TRIAD_TOKEN')).toMatch(/"username":"admin","email":"admin@localhost"/);
    // 3: the repositories, with their clone URLs on this server
    for (const vcs of ['git', 'hg', 'fossil']) {
      expect(out('for vcs in git hg fossil')).toContain(`"clone_url":"${url}/acme/hello-${vcs}"`);
    }
    // 7: what was pushed is there
    expect(out('/hello-fossil/blob/README')).toContain('Hello from Fossil');
    // 9: the pipeline ran in the sandbox and its log says so
    const pipeline = out('/pipelines/1/steps/1/log');
    expect(pipeline).toMatch(/"status":"success"/);
    expect(pipeline).not.toMatch(/"status":"(failure|error|cancelled|skipped)"/);
    expect(pipeline).toMatch(/hello from acme\/hello-git at [0-9a-f]{40} on main \(push\)/);
    // 10: a pull request per kind, clean on read, merged, its source gone from the ref list
    for (const [vcs, target] of [
      ['git', 'main'],
      ['hg', '@'],
      ['fossil', 'trunk'],
    ] as const) {
      const opened = out(`/hello-${vcs}/pulls`, '"source_ref":"feature"');
      expect(opened).toContain(`"target_ref":"${target}"`);
      expect(opened).toMatch(
        /"mergeable_state":"clean","conflicted_files":\[\],"commits_ahead":1,"commits_behind":0/,
      );
      const merged = out(`/hello-${vcs}/pulls/1/merge`);
      expect(merged).toMatch(/"status":"merged"/);
      expect(merged).toMatch(/"merge_commit":"[0-9a-f]{40,64}"/);
      // the block ends with the ref list
      const refs = JSON.parse(merged.slice(merged.lastIndexOf('{"data":['))) as { data: { name: string }[] };
      expect(refs.data.map((r) => r.name)).toEqual([target]);
    }
    // 11: the release's file comes back byte for byte, with the digest the upload answered
    const uploaded = /"digest":"sha256:([0-9a-f]{64})"/.exec(out('attachment=@hello-1.0.tar.gz'))?.[1];
    expect(uploaded).toBeDefined();
    const downloaded = out('cmp hello-1.0.tar.gz downloaded.tar.gz');
    expect(downloaded).toContain('downloaded the same bytes');
    expect(downloaded).toContain(`${uploaded}  downloaded.tar.gz`);
    expect(downloaded).toMatch(/^v1\.0$/m);
    expect(await fs.readFile(path.join(work, 'downloaded.tar.gz'))).toEqual(
      await fs.readFile(path.join(work, 'hello-1.0.tar.gz')),
    );
    // 12: both samples verified genuine deliveries and refused a forged one
    const python = ran.filter((r) => r.block.code.trim() === 'cat receiver.log');
    expect(python).toHaveLength(1);
    expect(python[0]!.output).toMatch(/^verified ping [0-9a-f-]{36}$/m);
    expect(python[0]!.output).toMatch(/^verified issue\.opened [0-9a-f-]{36}$/m);
    const forged = out("sha256=00' http://127.0.0.1");
    expect(forged).toMatch(/^401$/m);
    expect(forged).toMatch(/^refused: bad signature$/m);
    expect(out('cat receiver.log', '/webhooks/1/deliveries')).toMatch(/^verified push [0-9a-f-]{36}$/m);

    // The server's own record agrees: every delivery reached a receiver that answered 204.
    const api = new Client(url, token);
    const deliveries = await api.get('/api/v1/repos/acme/hello-git/webhooks/1/deliveries');
    expect(deliveries.status).toBe(200);
    // (the ping and the delivery may arrive in either order)
    expect(deliveries.body.data.map((d: any) => [d.event_type, d.response_code, d.success]).sort()).toEqual([
      ['issue.opened', 204, true],
      ['ping', 204, true],
      ['push', 204, true],
    ]);
    const ids = Object.fromEntries(deliveries.body.data.map((d: any) => [d.event_type, d.delivery_id]));
    expect(python[0]!.output).toContain(`verified ping ${ids.ping}\n`);
    expect(python[0]!.output).toContain(`verified issue.opened ${ids['issue.opened']}\n`);
    expect(out('cat receiver.log', '/webhooks/1/deliveries')).toContain(`verified push ${ids.push}\n`);
    for (const vcs of ['git', 'hg', 'fossil']) {
      expect((await api.get(`/api/v1/repos/acme/hello-${vcs}/pulls/1`)).body.data.status).toBe('merged');
    }

    // "Ctrl-C stops it cleanly"
    await ctrlC(server!);
  }, 300_000);
});
