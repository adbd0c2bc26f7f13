// Drives Weir's console in Debian's chromium through playwright-core:
// run by e2e/console_test.go against a real `weir serve`, which passes
// what it needs in the environment. Each step logs a line; the first
// failure exits non-zero with its reason. Screenshots of each view go
// to WEIR_SHOTS.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env('WEIR_URL');
const token = env('WEIR_ADMIN_TOKEN');
const key = env('WEIR_KEY');
const revokeID = env('WEIR_REVOKE_KEY_ID');
const revokeSecret = env('WEIR_REVOKE_KEY');
const shots = env('WEIR_SHOTS');
const chatModel = env('WEIR_CHAT_MODEL');
const chatScope = env('WEIR_CHAT_SCOPE');
const videoModel = env('WEIR_VIDEO_MODEL');
const keyName = env('WEIR_KEY_NAME');

const step = (s) => console.log(`step: ${s}`);
const fail = (s) => { throw new Error(s); };

function chat(agent) {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'User-Agent': agent },
    body: JSON.stringify({ model: chatModel, messages: [{ role: 'user', content: 'hi' }] }),
  }).then(async (r) => ({ status: r.status, body: await r.text() }));
}

async function waitFor(page, what, fn, arg, timeout = 20000) {
  try {
    await page.waitForFunction(fn, arg, { timeout, polling: 100 });
  } catch (e) {
    await page.screenshot({ path: join(shots, 'failure.png'), fullPage: true }).catch(() => {});
    fail(`${what}: not within ${timeout} ms (${e.message.split('\n')[0]})`);
  }
}

const shot = (page, name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

// confirm clicks the confirmation dialog's Confirm button.
async function confirm(page) {
  await page.locator('#confirm-ok').click();
}

const profile = mkdtempSync(join(tmpdir(), 'weir-chromium-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.WEIR_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
let code = 0;
try {
  const page = ctx.pages()[0] || (await ctx.newPage());
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));

  // 1. No token, no console.
  step('the console refuses a visitor without the token');
  let resp = await page.goto(base + '/');
  if (resp.status() !== 401) fail(`GET / without a session: ${resp.status()}; want 401`);
  if (!(await page.locator('#login').isVisible())) fail('no login form');
  if (await page.locator('meta[name="weir-csrf"]').count()) fail('the console page was served without a session');
  resp = await page.goto(base + '/console/api/events');
  if (resp.status() !== 401) fail(`the event stream without a session: ${resp.status()}; want 401`);
  for (const [who, hdr] of [['an API key', `Bearer ${key}`], ['no token', '']]) {
    const r = await fetch(`${base}/console/api/session`, { headers: hdr ? { Authorization: hdr } : {} });
    if (r.status !== 401) fail(`the console API with ${who}: ${r.status}; want 401`);
  }
  await page.goto(base + '/');
  await page.fill('#token', 'not-the-token');
  await page.click('#login button');
  await page.waitForSelector('#login-error');
  await shot(page, 'login');

  // 2. Log in.
  step('log in with the admin token');
  await page.fill('#token', token);
  await page.click('#login button');
  await page.waitForSelector('#live.on', { timeout: 10000 });
  const cookies = await ctx.cookies();
  const sess = cookies.find((c) => c.name === 'weir_console');
  if (!sess || !sess.httpOnly || sess.sameSite !== 'Strict') fail(`session cookie ${JSON.stringify(sess)}`);

  // 3. A burst queues up and drains, live.
  step('a burst on the capacity-2 model queues up and drains live');
  const burst = [];
  for (let i = 0; i < 10; i++) burst.push(chat(`burst-${i}`));
  const row = `tr[data-model="${chatModel}"]`;
  await waitFor(page, 'the overview to show the burst queued', (row) => {
    const q = document.querySelector(`${row} [data-testid=queued]`);
    const f = document.querySelector(`${row} [data-testid=inflight]`);
    return q && Number(q.textContent) >= 5 && f && f.textContent.trim() === '2 / 2';
  }, row);
  await shot(page, 'overview-burst');
  await waitFor(page, 'the overview to show the burst drained', (row) => {
    const q = document.querySelector(`${row} [data-testid=queued]`);
    const f = document.querySelector(`${row} [data-testid=inflight]`);
    const s = document.querySelector(`${row} [data-testid=queued-served]`);
    return q && q.textContent === '0' && f && f.textContent.trim() === '0 / 2' && s && Number(s.textContent.replace(/,/g, '')) >= 5;
  }, row, 30000);
  for (const r of await Promise.all(burst)) if (r.status !== 200) fail(`a burst request got ${r.status}: ${r.body}`);
  await shot(page, 'overview');

  // 4. One scope's queue: positions move up as it drains.
  step("a scope's queue shows waiters in order, and their positions change");
  const burst2 = [];
  for (let i = 0; i < 8; i++) burst2.push(chat(`queue-${i}`));
  await page.goto(`${base}/#/queue/${encodeURIComponent(chatScope)}`);
  await waitFor(page, 'the queue to list waiters', () => document.querySelectorAll('[data-testid=waiters] tr[data-waiter]').length >= 4);
  const last = await page.evaluate(() => {
    const rows = [...document.querySelectorAll('[data-testid=waiters] tr[data-waiter]')];
    const ps = rows.map((r) => Number(r.querySelector('[data-testid=position]').textContent));
    if (ps.some((p, i) => p !== i + 1)) return { bad: ps };
    const r = rows[rows.length - 1];
    return { id: r.dataset.waiter, pos: Number(r.querySelector('[data-testid=position]').textContent) };
  });
  if (last.bad) fail(`positions ${last.bad}; want 1, 2, …`);
  // Waiters show their key by its name (the id beside it), and the page
  // says which of how many it lists.
  const keyCell = await page.textContent('[data-testid=waiters] tr[data-waiter] [data-testid=waiter-key]');
  if (!keyCell.includes(keyName)) fail(`a waiter's key shows as ${JSON.stringify(keyCell)}; want its name ${keyName}`);
  if (!/waiters 1–\d+ of \d+/.test(await page.textContent('[data-testid=pager]'))) fail('the queue has no pager');
  await shot(page, 'queue');
  await waitFor(page, `waiter ${last.id} to move up from ${last.pos}`, (w) => {
    const r = document.querySelector(`tr[data-waiter="${w.id}"]`);
    return r && Number(r.querySelector('[data-testid=position]').textContent) < w.pos;
  }, last);
  await shot(page, 'queue-moved');
  for (const r of await Promise.all(burst2)) if (r.status !== 200) fail(`a queued request got ${r.status}: ${r.body}`);

  // 5. Cancel a queued task.
  step('cancel a queued task');
  const ids = [];
  for (let i = 0; i < 2; i++) {
    const r = await fetch(`${base}/v1/videos`, {
      method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: videoModel, prompt: `a weir at dawn ${i}` }),
    });
    const v = await r.json();
    if (!r.ok) fail(`submit a video: ${r.status} ${JSON.stringify(v)}`);
    ids.push(v.id);
  }
  const queuedID = ids[1];
  await page.goto(`${base}/#/tasks`);
  await page.selectOption('#task-status', 'queued');
  await waitFor(page, `task ${queuedID} to be listed as queued`, (id) => !!document.querySelector(`tr[data-task="${id}"][data-status=queued]`), queuedID);
  const taskKey = await page.textContent(`tr[data-task="${queuedID}"] [data-testid=task-key]`);
  if (!taskKey.includes(keyName)) fail(`a task's key shows as ${JSON.stringify(taskKey)}; want its name ${keyName}`);
  await shot(page, 'tasks');
  await page.click(`tr[data-task="${queuedID}"] [data-cancel-task]`);
  await confirm(page);
  await page.selectOption('#task-status', '');
  await waitFor(page, `task ${queuedID} to show cancelled`, (id) => !!document.querySelector(`tr[data-task="${id}"][data-status=cancelled]`), queuedID);
  await page.goto(`${base}/#/task/${encodeURIComponent(queuedID)}`);
  await waitFor(page, 'the task detail', () => document.querySelector('[data-testid=task-status]')?.textContent.includes('cancelled'));
  await shot(page, 'task');
  const t = await (await fetch(`${base}/v1/videos/${queuedID}`, { headers: { Authorization: `Bearer ${key}` } })).json();
  if (t.status !== 'failed' && t.status !== 'cancelled' && !JSON.stringify(t).includes('cancel')) fail(`the API says the cancelled task is ${JSON.stringify(t)}`);

  // 6. Keys: create one (its secret shown once), revoke another.
  step('create a key and revoke another');
  await page.goto(`${base}/#/keys`);
  await page.waitForSelector(`tr[data-key="${revokeID}"]`);
  await page.fill('#new-key input[name=name]', 'made-in-the-console');
  await page.click('#new-key button');
  await page.waitForSelector('[data-testid=secret] code');
  const secret = await page.textContent('[data-testid=secret] code');
  if (!secret || secret.length < 20) fail(`the new key's secret: ${secret}`);
  await shot(page, 'keys');
  await page.click(`tr[data-key="${revokeID}"] [data-revoke]`);
  await confirm(page);
  await waitFor(page, `key ${revokeID} to show revoked`, (id) => document.querySelector(`tr[data-key="${id}"] [data-testid=key-state]`)?.textContent.includes('revoked'), revokeID);
  let refused = false;
  for (let i = 0; i < 60 && !refused; i++) {
    const r = await fetch(`${base}/v1/models`, { headers: { Authorization: `Bearer ${revokeSecret}` } });
    refused = r.status === 401;
    if (!refused) await new Promise((ok) => setTimeout(ok, 100));
  }
  if (!refused) fail('the revoked key still works');
  const fresh = await fetch(`${base}/v1/models`, { headers: { Authorization: `Bearer ${secret}` } });
  if (fresh.status !== 200) fail(`the key made in the console: ${fresh.status}`);

  // 7. Drain and resume a platform model.
  step('drain and resume a platform model');
  await page.goto(`${base}/#/scopes`);
  const pm = chatScope.slice(3);
  await page.click(`[data-drain="${pm}"]`);
  await confirm(page);
  await waitFor(page, 'the scope to show drained', (s) => document.querySelector(`tr[data-scope="${s}"]`)?.textContent.includes('drained'), chatScope);
  await shot(page, 'scopes');
  await page.click(`[data-resume="${pm}"]`);
  await confirm(page);
  await waitFor(page, 'the scope to take requests again', (s) => !document.querySelector(`tr[data-scope="${s}"]`)?.textContent.includes('drained'), chatScope);
  const after = await chat('after-resume');
  if (after.status !== 200) fail(`after resuming: ${after.status} ${after.body}`);

  // 8. Spend: the burst's cost against its group's (soft) budget, a
  // millionth a day, used up: its bar is red.
  step("the spend page shows the group's budget used up");
  let total = '0.00';
  for (let i = 0; i < 100 && total === '0.00'; i++) {
    const r = await fetch(`${base}/admin/spend?by=group&window=day`, { headers: { Authorization: `Bearer ${token}` } });
    total = (await r.json()).total ?? '0.00';
    if (total === '0.00') await new Promise((ok) => setTimeout(ok, 100));
  }
  if (total === '0.00') fail('no spend recorded for the burst');
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const counted = metrics.split('\n').find((l) => l.startsWith('weir_spend_total{') && l.includes('group="default"'));
  if (!counted || !(Number(counted.split(' ').pop()) > 0)) fail(`weir_spend_total has no spend of the default group: ${counted}`);
  await page.goto(`${base}/#/spend`);
  await page.selectOption('#spend-window', 'day');
  const bar = '[data-testid=spend-groups] tr[data-subject="group:default"] [data-testid=budget]';
  await waitFor(page, "the default group's budget bar", (sel) => !!document.querySelector(sel), bar);
  const b = await page.evaluate((sel) => {
    const el = document.querySelector(sel);
    const fill = el.querySelector('rect.fill');
    return { level: el.dataset.level, cls: fill?.getAttribute('class'), width: Number(fill?.getAttribute('width')), color: fill && getComputedStyle(fill).fill };
  }, bar);
  if (b.level !== 'over' || b.cls !== 'fill lvl-over' || b.width !== 100) fail(`the budget bar: ${JSON.stringify(b)}; want a full red one`);
  const spent = await page.textContent('[data-testid=spend-groups] tr[data-subject="group:default"] [data-testid=spent]');
  if (!(Number(spent) > 0)) fail(`the default group spent ${spent}`);
  if ((await page.locator('[data-testid=spend-chart] rect.spend-bar').count()) < 1) fail('the spend chart has no bars');
  await shot(page, 'spend');

  await page.goto(`${base}/#/nodes`);
  await page.waitForSelector('main h2');
  await shot(page, 'nodes');

  // 9. Log out: the console is closed again.
  step('log out');
  await page.click('#logout');
  await page.waitForSelector('#login');
  step('done');
} catch (e) {
  console.log(`FAIL: ${e.message}`);
  code = 1;
} finally {
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
