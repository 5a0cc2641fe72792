// Renders a report.html in headless Chromium and checks it; exits 1 naming every problem.
//
//   node check_page.mjs PAGE.html SCREENSHOT.png [--expect-plots N] [--no-js]
//                       [--inject drop-plot|console-error|drop-tables]
//
// Talks the Chrome DevTools Protocol over --remote-debugging-pipe (file descriptors 3 and 4,
// NUL-terminated JSON messages): no npm package, no WebSocket. Checks:
//   - the page loads from file:// and makes no other request (no network), logs no console
//     error or warning, throws no exception;
//   - every <figure class="plot"> is drawn (report.js marks it data-drawn) on a canvas that is
//     visible and has non-white pixels, every figure has an entry in #plot-data and the other
//     way round, and (--expect-plots) there are at least N of them;
//   - basic accessibility: <html lang>, exactly one <h1>, no skipped heading level, every
//     canvas/img/svg has role="img" and an aria-label (img: alt), every table a <caption> and
//     <th scope> headers, every button an accessible name, and WCAG 2 contrast >= 4.5:1 for
//     the text of every element with text (its colour against the first opaque background
//     behind it);
// then writes a full-page PNG screenshot. --inject makes a copy of the page with one plot's
// data removed, a console.error added or every table removed: the check must then fail (the
// inverted tests).
// --no-js renders with JavaScript disabled (the reader without it): then no figure may be drawn,
// and every figure's section must hold a static table with at least one row (the numbers the
// figure would plot), besides the accessibility and contrast checks.
// Chromium runs with --no-sandbox: its sandbox cannot start as root in a container.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const expectPlots = Number(option('--expect-plots') ?? 1);
// --element-shot 'SELECTOR=FILE': also a PNG of the first element matching SELECTOR, scaled to
// 60 % (the pictures in docs/reports.md).
const elementShots = [];
for (let v; (v = option('--element-shot')) !== undefined;) elementShots.push(v);
const inject = option('--inject');
const noJsAt = args.indexOf('--no-js');
const noJs = noJsAt >= 0;
if (noJs) args.splice(noJsAt, 1);
const chromium = option('--chromium') ?? process.env.CHROMIUM ?? 'chromium';
if (args.length !== 2) {
  console.error('usage: check_page.mjs PAGE.html SCREENSHOT.png [--expect-plots N] ' +
    '[--inject drop-plot|console-error] [--chromium PATH]');
  process.exit(2);
}
const [pagePath, screenshotPath] = args.map((a) => resolve(a));
const problems = [];
if (!existsSync(pagePath)) {
  console.error(`check_page: ${pagePath} does not exist (was the report written?)`);
  process.exit(1);
}
const profile = mkdtempSync(join(tmpdir(), 'shardcheck-chromium-'));

let page = pagePath;
if (inject) {
  let html = readFileSync(pagePath, 'utf8');
  if (inject === 'drop-plot') {
    // Remove the first plot's data entry: its figure stays, undrawn.
    html = html.replace(/(<script type="application\/json" id="plot-data">\{\n)"[^"]+": [^\n]*,?\n/,
      '$1');
  } else if (inject === 'drop-tables') {
    html = html.replace(/<table[\s\S]*?<\/table>/g, '');
  } else if (inject === 'console-error') {
    html = html.replace('</body>', '<script>console.error("injected by the test");</script></body>');
  } else {
    console.error(`unknown --inject ${inject}`);
    process.exit(2);
  }
  page = join(profile, 'injected.html');
  writeFileSync(page, html);
}

const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu',
  '--remote-debugging-pipe', '--no-first-run', '--no-default-browser-check',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  `--user-data-dir=${profile}`, 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
let stderr = '';
browser.stderr.on('data', (d) => { stderr += d; });
const toBrowser = browser.stdio[3];
const fromBrowser = browser.stdio[4];

let nextId = 1;
const pending = new Map();
const listeners = [];
let buffer = Buffer.alloc(0);
fromBrowser.on('data', (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  let end;
  while ((end = buffer.indexOf(0)) >= 0) {
    const msg = JSON.parse(buffer.subarray(0, end).toString('utf8'));
    buffer = buffer.subarray(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const { ok, fail } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) fail(new Error(`${msg.error.message} (${JSON.stringify(msg.error)})`));
      else ok(msg.result);
    } else if (msg.method) {
      listeners.forEach((l) => l(msg));
    }
  }
});
const send = (method, params = {}, sessionId) => new Promise((ok, fail) => {
  const id = nextId++;
  pending.set(id, { ok, fail });
  toBrowser.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
});
const once = (method) => new Promise((ok) => {
  const l = (msg) => { if (msg.method === method) { listeners.splice(listeners.indexOf(l), 1); ok(msg); } };
  listeners.push(l);
});

listeners.push((msg) => {
  const p = msg.params;
  if (msg.method === 'Runtime.consoleAPICalled' && ['error', 'warning', 'assert'].includes(p.type)) {
    problems.push(`console ${p.type}: ${p.args.map((a) => a.value ?? a.description).join(' ')}`);
  } else if (msg.method === 'Runtime.exceptionThrown') {
    const d = p.exceptionDetails;
    problems.push(`uncaught exception: ${d.exception?.description ?? d.text} (line ${d.lineNumber})`);
  } else if (msg.method === 'Log.entryAdded' && ['error', 'warning'].includes(p.entry.level)) {
    problems.push(`browser log ${p.entry.level}: ${p.entry.text} ${p.entry.url ?? ''}`);
  } else if (msg.method === 'Network.requestWillBeSent') {
    const url = p.request.url;
    if (!url.startsWith('file:') && !url.startsWith('data:') && url !== 'about:blank') {
      problems.push(`network request: ${url} (the page must be self-contained)`);
    }
  }
});

// The checks run inside the page; returns {plots, problems}.
const inPage = `((noJs) => {
  const problems = [];
  const data = JSON.parse(document.getElementById('plot-data').textContent);
  const figures = [...document.querySelectorAll('figure.plot')];
  for (const id of Object.keys(data)) {
    if (!document.getElementById(id)) problems.push('plot data ' + id + ' has no figure');
  }
  for (const f of noJs ? figures : []) {
    if (f.dataset.drawn) problems.push('figure ' + f.id + ' was drawn with JavaScript disabled');
    const section = f.closest('section') ?? document.body;
    if (!section.querySelector('table tbody tr, table tr td')) {
      problems.push('figure ' + f.id + ' has no static table beside it (a reader without JavaScript sees nothing)');
    }
  }
  for (const f of noJs ? [] : figures) {
    const c = f.querySelector('canvas');
    if (!c) { problems.push('figure ' + f.id + ' has no canvas'); continue; }
    if (!data[f.id]) problems.push('figure ' + f.id + ' has no plot data');
    if (!f.dataset.drawn) problems.push('figure ' + f.id + ' was not drawn');
    const r = c.getBoundingClientRect();
    if (r.width < 50 || r.height < 50) { problems.push('figure ' + f.id + ' is ' + r.width + 'x' + r.height + ' px'); continue; }
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] > 0 && (px[i] < 240 || px[i + 1] < 240 || px[i + 2] < 240)) ink++;
    }
    if (ink < 0.005 * c.width * c.height) problems.push('figure ' + f.id + ' is blank (' + ink + ' inked pixels)');
    if (!f.querySelector('figcaption')?.textContent.trim()) problems.push('figure ' + f.id + ' has no caption');
  }
  // Accessibility.
  if (!document.documentElement.lang) problems.push('<html> has no lang');
  const h1 = document.querySelectorAll('h1').length;
  if (h1 !== 1) problems.push(h1 + ' <h1> elements (want 1)');
  let level = 0;
  for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
    const l = Number(h.tagName[1]);
    if (l > level + 1) problems.push('heading "' + h.textContent.slice(0, 40) + '" skips from h' + level + ' to h' + l);
    level = l;
  }
  for (const e of document.querySelectorAll('canvas, svg')) {
    if (e.getAttribute('role') !== 'img' || !e.getAttribute('aria-label')) problems.push(e.tagName + ' without role=img and aria-label');
  }
  for (const e of document.querySelectorAll('img')) if (!e.hasAttribute('alt')) problems.push('img without alt');
  for (const t of document.querySelectorAll('table')) {
    if (!t.querySelector('caption')?.textContent.trim()) problems.push('table without caption');
    const ths = t.querySelectorAll('th');
    if (!t.querySelector('thead th')) problems.push('table "' + (t.caption?.textContent ?? '') + '" without header cells');
    for (const th of ths) if (!th.getAttribute('scope')) { problems.push('th without scope'); break; }
  }
  for (const b of document.querySelectorAll('button')) {
    if (!(b.getAttribute('aria-label') || b.textContent.trim())) problems.push('button without a name');
  }
  const rgba = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((a, v, k) => a + v * [0.2126, 0.7152, 0.0722][k], 0);
  let worst = Infinity, worstText = '';
  for (const e of document.body.querySelectorAll('*')) {
    if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    if (e.closest('script, style, noscript')) continue;
    const fg = rgba(getComputedStyle(e).color);
    let bg = null;
    for (let a = e; a; a = a.parentElement) {
      const c = rgba(getComputedStyle(a).backgroundColor);
      if (c.length === 3 || c[3] === 1) { bg = c; break; }
    }
    bg = bg ?? [255, 255, 255];
    const [l1, l2] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (l1 + 0.05) / (l2 + 0.05);
    if (ratio < worst) { worst = ratio; worstText = e.tagName + ' "' + e.textContent.trim().slice(0, 30) + '"'; }
    if (ratio < 4.5) problems.push('contrast ' + ratio.toFixed(2) + ':1 < 4.5:1 for ' + e.tagName + ' "' + e.textContent.trim().slice(0, 40) + '"');
  }
  return { plots: figures.length, problems: [...new Set(problems)], worstContrast: worst.toFixed(2) + ':1 (' + worstText + ')',
    height: Math.ceil(document.documentElement.scrollHeight) };
})(${noJs})`;

const timer = setTimeout(() => {
  console.error('check_page: timed out after 60 s\n' + stderr.slice(-2000));
  browser.kill('SIGKILL');
  process.exit(1);
}, 60000);

try {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const s = (m, p) => send(m, p, sessionId);
  await s('Runtime.enable');
  await s('Log.enable');
  await s('Network.enable');
  await s('Page.enable');
  await s('Emulation.setDeviceMetricsOverride', { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
  if (noJs) await s('Emulation.setScriptExecutionDisabled', { value: true });
  const loaded = once('Page.loadEventFired');
  await s('Page.navigate', { url: pathToFileURL(page).href });
  await loaded;
  const { result, exceptionDetails } = await s('Runtime.evaluate', { expression: inPage, returnByValue: true });
  if (exceptionDetails) throw new Error('the in-page checks threw: ' + JSON.stringify(exceptionDetails));
  const r = result.value;
  problems.push(...r.problems);
  if (r.plots < expectPlots) problems.push(`${r.plots} plots, expected at least ${expectPlots}`);
  await s('Emulation.setDeviceMetricsOverride', { width: 1280, height: Math.min(r.height, 16000), deviceScaleFactor: 1, mobile: false });
  const shot = await s('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
  writeFileSync(screenshotPath, Buffer.from(shot.data, 'base64'));
  for (const spec of elementShots) {
    const [selector, file] = [spec.slice(0, spec.lastIndexOf('=')), spec.slice(spec.lastIndexOf('=') + 1)];
    const box = await s('Runtime.evaluate', { returnByValue: true, expression:
      `(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
        return { x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height }; })()` });
    const clip = { ...box.result.value, scale: 0.6 };
    const part = await s('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: true });
    writeFileSync(resolve(file), Buffer.from(part.data, 'base64'));
  }
  console.log(`check_page: ${r.plots} figures, lowest text contrast ${r.worstContrast}, ` +
    `screenshot ${screenshotPath} (1280x${Math.min(r.height, 16000)})`);
  const exited = new Promise((ok) => browser.once('exit', ok));
  await send('Browser.close').catch(() => {});
  await exited;
} catch (e) {
  // Chromium's own stderr (minus its D-Bus noise: no system bus in a container) says why.
  const log = stderr.split('\n').filter((l) => !l.includes('dbus')).join('\n');
  problems.push(`${e.message}\n${log.slice(-2000)}`);
  const exited = new Promise((ok) => browser.once('exit', ok));
  browser.kill('SIGKILL');
  await exited;
} finally {
  clearTimeout(timer);
  rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
}
for (const p of problems) console.log(`PROBLEM ${p}`);
console.log(problems.length ? `check_page: FAIL, ${problems.length} problems in ${page}` : 'check_page: PASS');
process.exit(problems.length ? 1 : 0);
