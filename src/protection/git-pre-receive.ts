/**
 * Git's pre-receive hook for a push to a repository with protection rules (src/vcs/git/transport.ts
 * points `core.hooksPath` at a script that runs this file). Git runs it after the pack is received
 * (its objects still in quarantine) and before any ref moves; a non-zero exit refuses every update
 * of the push, and what it prints goes to the client as `remote: ...` lines.
 *
 * Input: `TRIAD_PROTECTION` (JSON `Protection`: the rules and the pusher) and one `old new ref`
 * line per update on stdin. Only branches (`refs/heads/*`) are judged; tags are not protected.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { firstRefusal, rulesFor, type Protection, type RefUpdate } from './rules.ts';

const ZERO = /^0+$/;

/** Whether `next` descends from `prev` (git's quarantine environment makes the new objects visible). */
function descends(prev: string, next: string): boolean {
  try {
    execFileSync('git', ['merge-base', '--is-ancestor', prev, next], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function main(): number {
  const protection = JSON.parse(process.env.TRIAD_PROTECTION ?? 'null') as Protection | null;
  if (protection === null) return 0;
  const updates: RefUpdate[] = [];
  for (const line of readFileSync(0, 'utf8').split('\n')) {
    const [oldId, newId, ref] = line.trim().split(' ');
    if (oldId === undefined || newId === undefined || ref === undefined || !ref.startsWith('refs/heads/'))
      continue;
    const name = ref.slice('refs/heads/'.length);
    const rules = rulesFor(protection.rules, name);
    if (rules.length === 0) continue;
    const old = ZERO.test(oldId) ? null : oldId;
    const next = ZERO.test(newId) ? null : newId;
    const needsAncestry = old !== null && next !== null && rules.some((r) => r.fast_forward_only);
    updates.push({
      name,
      type: 'branch',
      old,
      new: next,
      fastForward: !needsAncestry || descends(old, next),
    });
  }
  const why = firstRefusal(protection.rules, updates, protection.pusher);
  if (why === undefined) return 0;
  process.stderr.write(`triad: push refused: ${why}\n`);
  return 1;
}

process.exitCode = main();
