// Keeps Weir's console open in headless chromium until killed: the
// overhead benchmark's "console" target (weir-bench --console-watcher
// node,e2e/browser/watch.mjs). It opens WEIR_URL (a gateway whose
// console lets loopback clients in), waits for the live stream and
// prints "watching".

import { chromium } from 'playwright-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), 'weir-watch-')), {
  executablePath: process.env.WEIR_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const page = ctx.pages()[0] || (await ctx.newPage());
await page.goto(process.env.WEIR_URL);
await page.waitForSelector('#live.on', { timeout: 30000 });
console.log('watching');
const quit = async () => { await ctx.close().catch(() => {}); process.exit(0); };
process.on('SIGTERM', quit);
process.on('SIGINT', quit);
setInterval(() => {}, 1 << 30);
