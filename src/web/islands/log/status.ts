/**
 * What the viewer says about the log: a status line under it ("12,345 lines · loading earlier
 * lines 40% · running", at most four times a second) and, for screen readers, a polite status
 * that tells "N new lines" at most every `ANNOUNCE_MS` (never line by line), and the step's end;
 * and User Timing marks (`log-viewer:start`, `:begin`, `:first-lines`, `:all-lines`).
 */
import type { LogModel } from './model.ts';

const ANNOUNCE_MS = 5000;

const fmt = (n: number) => n.toLocaleString('en');

export class Teller {
  private readonly model: LogModel;
  private readonly state: HTMLElement;
  private readonly announce: HTMLElement;
  private readonly wake: () => void;
  private announced = { lines: -1, at: 0 };
  private later = false;
  private stateAt = 0;
  private marks = 0;
  status: string;
  exitCode: number | null = null;

  constructor(model: LogModel, state: HTMLElement, announce: HTMLElement, status: string, wake: () => void) {
    this.model = model;
    this.state = state;
    this.announce = announce;
    this.status = status;
    this.wake = wake;
  }

  private mark(name: string): void {
    performance.mark(`log-viewer:${name}`, { detail: this.model.lines });
    this.marks++;
  }

  /** Says something now (and holds the next news for a while). */
  say(text: string): void {
    this.announce.textContent = text;
    this.announced.at = performance.now();
  }

  finished(status: string, exitCode: number | null): void {
    this.status = status;
    this.exitCode = exitCode;
    const code = exitCode === null ? '' : ` (exit code ${exitCode})`;
    this.say(`Step finished: ${status}${code}.`);
  }

  /** Called at each frame (also sets User Timing marks for measures: first lines, all lines). */
  tell(): void {
    const now = performance.now();
    const m = this.model;
    if (this.marks === 0 && m.lines > 0) this.mark('first-lines');
    else if (this.marks === 1 && m.headDone) this.mark('all-lines');
    if (now - this.stateAt > 250 || m.done) {
      this.stateAt = now;
      const parts = [`${fmt(m.lines)} lines`];
      if (!m.headDone && m.start > 0)
        parts.push(`loading earlier lines ${Math.floor((100 * m.headBytes) / m.start)}%`);
      const code = this.exitCode === null ? '' : ` (exit code ${this.exitCode})`;
      parts.push(m.done ? `${this.status}${code}` : 'running');
      const text = parts.join(' · ');
      if (this.state.textContent !== text) this.state.textContent = text;
    }
    const lines = m.tail.lines;
    if (this.announced.lines < 0) this.announced = { lines, at: now };
    else if (lines > this.announced.lines) {
      const wait = this.announced.at + ANNOUNCE_MS - now;
      if (wait <= 0) {
        this.announce.textContent = `${fmt(lines - this.announced.lines)} new lines`;
        this.announced = { lines, at: now };
      } else if (!this.later) {
        // (the last lines are told too, when no more come)
        this.later = true;
        setTimeout(() => {
          this.later = false;
          this.wake();
        }, wait);
      }
    }
  }
}
