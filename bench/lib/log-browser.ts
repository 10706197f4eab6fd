/**
 * Measures of a log page in Chromium (playwright-core) for bench/log-viewer.ts: animation frame
 * times (requestAnimationFrame deltas), main-thread long tasks (a `longtask` observer), row
 * elements, the JS heap (CDP `Runtime.getHeapUsage`) and the renderer process's memory (its pid
 * from CDP `SystemInfo.getProcessInfo`, its resident set from /proc), after a full GC
 * (`HeapProfiler.collectGarbage`) and a memory pressure notification.
 */
import fs from 'node:fs/promises';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';

export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.TRIAD_CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-dev-shm-usage',
    ],
  });
}

/** Installed before the page's scripts: records every frame's time and every long task. */
function instrument(): void {
  const g = globalThis as any;
  const rec = { frames: [] as number[], at: [] as number[], tasks: [] as Array<[number, number]> };
  g.__bench = rec;
  let last = 0;
  const loop = (t: number) => {
    if (last > 0) {
      rec.frames.push(t - last);
      rec.at.push(t);
    }
    last = t;
    g.requestAnimationFrame(loop);
  };
  g.requestAnimationFrame(loop);
  new g.PerformanceObserver((list: any) => {
    for (const e of list.getEntries()) rec.tasks.push([e.startTime, e.duration]);
  }).observe({ type: 'longtask', buffered: true });
}

export type Watch = { context: BrowserContext; page: Page; cdp: CDPSession; browser: Browser };

export async function openPage(browser: Browser): Promise<Watch> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.addInitScript(instrument);
  const cdp = await context.newCDPSession(page);
  return { context, page, cdp, browser };
}

export type FrameStats = { frames: number; p50: number; p99: number; max: number; over20: number };

/** Frame and long-task figures between page times `from` and `to` (ms since its navigation). */
export async function frames(
  w: Watch,
  from: number,
  to: number,
): Promise<{ f: FrameStats; longTasks: number; longestTaskMs: number }> {
  const rec = await w.page.evaluate(() => (globalThis as any).__bench);
  const d: number[] = [];
  rec.frames.forEach((ms: number, i: number) => {
    if (rec.at[i] >= from && rec.at[i] <= to) d.push(ms);
  });
  d.sort((a, b) => a - b);
  const q = (p: number) => d[Math.min(d.length - 1, Math.floor(p * d.length))] ?? NaN;
  const tasks = (rec.tasks as Array<[number, number]>).filter(([t]) => t >= from && t <= to);
  return {
    f: {
      frames: d.length,
      p50: q(0.5),
      p99: q(0.99),
      max: d.at(-1) ?? NaN,
      over20: d.filter((x) => x > 20).length,
    },
    longTasks: tasks.length,
    longestTaskMs: Math.max(0, ...tasks.map(([, ms]) => ms)),
  };
}

/** The page's clock now (ms since its navigation). */
export function pageNow(w: Watch): Promise<number> {
  return w.page.evaluate(() => (globalThis as any).performance.now() as number);
}

export async function jsHeapMiB(w: Watch): Promise<number> {
  const h = (await w.cdp.send('Runtime.getHeapUsage')) as { usedSize: number };
  return h.usedSize / 2 ** 20;
}

/** The resident memory of the renderer processes (the largest: the page's), in MiB. */
export async function rendererMiB(w: Watch): Promise<number> {
  const session = await w.browser.newBrowserCDPSession();
  try {
    const info = (await session.send('SystemInfo.getProcessInfo')) as {
      processInfo: Array<{ type: string; id: number }>;
    };
    let most = 0;
    for (const p of info.processInfo.filter((x) => x.type === 'renderer')) {
      const status = await fs.readFile(`/proc/${p.id}/status`, 'utf8').catch(() => '');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
      most = Math.max(most, kb / 1024);
    }
    return most;
  } finally {
    await session.detach();
  }
}

/**
 * A full garbage collection in the page and a (simulated) critical memory pressure notification
 * (the renderer then gives back the memory its allocators keep free), then the page's JS heap and
 * its renderer's memory.
 */
export async function afterGc(w: Watch): Promise<{ heapMiB: number; rendererMiB: number }> {
  await w.cdp.send('HeapProfiler.collectGarbage');
  await w.cdp.send('Memory.simulatePressureNotification', { level: 'critical' });
  await w.page.waitForTimeout(1000);
  await w.cdp.send('HeapProfiler.collectGarbage');
  return { heapMiB: await jsHeapMiB(w), rendererMiB: await rendererMiB(w) };
}

/**
 * Types `query` in the viewer's search box and presses Enter; answers the ms from the key to the
 * first frame showing the current hit, and the hit's line number and whether it is on screen.
 */
export async function searchTo(
  w: Watch,
  query: string,
): Promise<{ ms: number; line: number; onScreen: boolean }> {
  await w.page.getByLabel('Search the log').fill(query);
  return w.page.evaluate(async () => {
    const g = globalThis as any;
    const doc = g.document;
    const input = doc.querySelector('.lv-find input');
    const t0 = g.performance.now();
    input.dispatchEvent(new g.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    for (;;) {
      await new Promise((r) => g.requestAnimationFrame(r));
      const mark = doc.querySelector('mark.lv-current');
      if (mark !== null) {
        const ms = g.performance.now() - t0;
        const box = doc.querySelector('.lv-scroll').getBoundingClientRect();
        const r = mark.getBoundingClientRect();
        return {
          ms,
          line: Number(mark.closest('.lv-row').querySelector('.lv-ln').textContent),
          onScreen: r.top >= box.top && r.bottom <= box.bottom,
        };
      }
      if (g.performance.now() - t0 > 10_000) return { ms: NaN, line: 0, onScreen: false };
    }
  });
}

/** Main-thread work in CPU time (a trace's thread time), which other processes on the machine do not stretch. */
export type CpuStats = {
  /** The page's main thread, and its worker, in ms of CPU per second of the run. */
  mainMsPerS: number;
  workerMsPerS: number;
  tasks: number;
  longestTaskMs: number;
  p99TaskMs: number;
  /** Tasks over 50 ms of CPU. */
  over50: number;
};

/** Runs `run` while tracing the page; answers its main thread's tasks in CPU time. */
export async function traceCpu(w: Watch, run: () => Promise<void>): Promise<CpuStats> {
  await w.browser.startTracing(w.page, { categories: ['devtools.timeline', 'toplevel'] });
  const t0 = performance.now();
  await run();
  const seconds = (performance.now() - t0) / 1000;
  const events = JSON.parse((await w.browser.stopTracing()).toString()).traceEvents as any[];
  const threads = (name: string) =>
    events.filter((e) => e.name === 'thread_name' && e.args?.name === name).map((e) => `${e.pid}:${e.tid}`);
  const tasksOf = (key: string) =>
    events.filter(
      (e) => `${e.pid}:${e.tid}` === key && e.ph === 'X' && e.name === 'ThreadControllerImpl::RunTask',
    );
  const busiest = (keys: string[]) => keys.map(tasksOf).sort((a, b) => b.length - a.length)[0] ?? [];
  const cpu = (list: any[]) => list.map((e) => (e.tdur ?? e.dur) / 1000).sort((a, b) => a - b);
  const main = cpu(busiest(threads('CrRendererMain')));
  const worker = cpu(busiest(threads('DedicatedWorker thread')));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  return {
    mainMsPerS: sum(main) / seconds,
    workerMsPerS: sum(worker) / seconds,
    tasks: main.length,
    longestTaskMs: main.at(-1) ?? 0,
    p99TaskMs: main[Math.floor(0.99 * (main.length - 1))] ?? 0,
    over50: main.filter((x) => x > 50).length,
  };
}
