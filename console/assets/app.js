// Weir's console: one page, live from the gateway's event stream
// (/console/api/events), views by the URL's hash. Plain ES module, no
// build step and no dependency; charts are SVG drawn here.

const csrf = document.querySelector('meta[name="weir-csrf"]').content;
const WINDOW = 900; // chart points kept: 15 minutes at one a second

const state = {
  snap: null,      // the newest snapshot
  points: [],      // chart points, oldest first
  lastSeq: 0,
  showKeys: false,
  secret: null,    // a key's secret, shown once after creating it
  taskFilter: { status: '', model: '' },
  queuePage: { scope: '', offset: 0 },
  spend: { window: 'month', subject: '' }, // the spend view's window, and whose spend it charts
};

const QUEUE_PAGE = 100; // waiters a page of the queue view

// ---- helpers ----

const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const $ = (sel) => document.querySelector(sel);

function dur(ms) {
  if (ms == null) return '—';
  const neg = ms < 0; ms = Math.abs(ms);
  let s;
  if (ms < 1000) s = `${Math.round(ms)} ms`;
  else if (ms < 60000) s = `${(ms / 1000).toFixed(1)} s`;
  else if (ms < 3600000) s = `${Math.floor(ms / 60000)} m ${Math.round((ms % 60000) / 1000)} s`;
  else s = `${Math.floor(ms / 3600000)} h ${Math.round((ms % 3600000) / 60000)} m`;
  return neg ? `-${s}` : s;
}
const num = (n) => (n == null ? '—' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 1 }));
const ago = (t) => (t ? dur(Date.now() - new Date(t).getTime()) + ' ago' : '—');
const limitText = (l) => (l > 0 ? num(l) : '∞');
// keyText shows a key by its name, with its id beside it.
const keyText = (id, name) => (name ? `${esc(name)} <code class="muted">${esc(id)}</code>` : `<code>${esc(id || '—')}</code>`);

async function api(path, opts = {}) {
  const init = { headers: {}, credentials: 'same-origin', ...opts };
  if (opts.body !== undefined) {
    init.method = opts.method || 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  if (init.method && init.method !== 'GET') init.headers['X-Weir-Csrf'] = csrf;
  const resp = await fetch(path, init);
  const data = await resp.json().catch(() => ({}));
  if (resp.status === 401) { location.reload(); }
  if (!resp.ok) throw new Error(data?.error?.message || resp.statusText);
  return data;
}

function alertBox(msg, kind = 'error') {
  const el = document.createElement('div');
  el.className = `alert ${kind}`;
  el.textContent = msg;
  el.dataset.testid = 'alert';
  $('#alerts').append(el);
  setTimeout(() => el.remove(), 8000);
}

// confirm asks before an action; resolves true on Confirm.
function confirmAction(text, ok = 'Confirm') {
  const dlg = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-ok').textContent = ok;
  dlg.returnValue = '';
  dlg.showModal();
  return new Promise((resolve) => dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true }));
}

async function act(text, okLabel, path, body, done) {
  if (!(await confirmAction(text, okLabel))) return;
  try {
    const res = await api(path, { body });
    if (done) done(res);
    render();
  } catch (e) {
    alertBox(e.message);
  }
}

// ---- the live stream ----

let source = null;
let retryTimer = null;

function connect() {
  clearTimeout(retryTimer);
  const url = '/console/api/events' + (state.lastSeq ? `?since=${state.lastSeq}` : '');
  source = new EventSource(url);
  source.addEventListener('open', () => setLive(true));
  source.addEventListener('history', (e) => {
    for (const p of JSON.parse(e.data).points) addPoint(p);
  });
  source.addEventListener('snapshot', (e) => {
    const snap = JSON.parse(e.data);
    if (state.snap && snap.seq < state.snap.seq) state.points = []; // the gateway restarted
    state.snap = snap;
    addPoint(snap.point);
    state.lastSeq = snap.seq;
    setLive(true);
    onSnapshot();
  });
  source.addEventListener('error', () => {
    setLive(false);
    if (source.readyState === EventSource.CLOSED) {
      // The browser gave up (the gateway answered an error): try again,
      // asking for what was missed.
      retryTimer = setTimeout(connect, 2000);
    }
  });
}

function addPoint(p) {
  const pts = state.points;
  if (pts.length && p.seq <= pts[pts.length - 1].seq) {
    if (p.seq < pts[0].seq || pts.some((q) => q.seq === p.seq)) return;
    pts.push(p);
    pts.sort((a, b) => a.seq - b.seq);
  } else {
    pts.push(p);
  }
  while (pts.length > WINDOW) pts.shift();
}

function setLive(on) {
  const el = $('#live');
  el.className = on ? 'live on' : 'live off';
  el.textContent = on ? 'live' : 'reconnecting…';
}

// ---- charts ----

// chart draws series (each {label, values, cls, dash}) over the points'
// times as an SVG line chart.
function chart(title, series, opts = {}) {
  const W = 420, H = 120, L = 44, B = 18, T = 16;
  const n = state.points.length;
  let max = opts.max ?? 0;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  if (max <= 0) max = 1;
  max = niceCeil(max);
  // Whole milliseconds label the axis: its half-way mark must be one.
  if (opts.unit === 'ms' && max < 2) max = 2;
  const step = (W - L - 4) / (WINDOW - 1);
  const x = (i) => W - 4 - (n - 1 - i) * step; // the newest point at the right edge
  const y = (v) => T + (H - T - B) * (1 - v / max);
  let lines = '';
  for (const s of series) {
    if (!s.values.length) continue;
    const d = s.values.map((v, i) => `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join('');
    lines += `<path class="${s.cls}" d="${d}"${s.dash ? ' stroke-dasharray="4 3"' : ''}/>`;
  }
  const legend = series.map((s) => `<span class="key ${s.cls}">${esc(s.label)}</span>`).join(' ');
  return `<figure class="chart"><figcaption>${esc(title)} <span class="legend">${legend}</span></figcaption>
<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">
<line class="axis" x1="${L}" y1="${y(0)}" x2="${W - 4}" y2="${y(0)}"/>
<line class="grid" x1="${L}" y1="${y(max)}" x2="${W - 4}" y2="${y(max)}"/>
<line class="grid" x1="${L}" y1="${y(max / 2)}" x2="${W - 4}" y2="${y(max / 2)}"/>
<text x="${L - 4}" y="${y(max) + 4}" text-anchor="end">${esc(fmtAxis(max, opts.unit))}</text>
<text x="${L - 4}" y="${y(max / 2) + 4}" text-anchor="end">${esc(fmtAxis(max / 2, opts.unit))}</text>
<text x="${L - 4}" y="${y(0) + 4}" text-anchor="end">0</text>
<text x="${L}" y="${H - 4}">-15 m</text><text x="${W - 4}" y="${H - 4}" text-anchor="end">now</text>
${lines}</svg></figure>`;
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
const fmtAxis = (v, unit) => (unit === 'ms' ? dur(v) : num(v));

const series = (model, f) => state.points.map((p) => f(p.models?.[model] || {}));

// ---- views ----

const views = { overview, scopes, queue, tasks, task: taskDetail, keys, spend, nodes };

function route() {
  const [, name = 'overview', ...rest] = location.hash.split('/');
  return { name: views[name] ? name : 'overview', arg: decodeURIComponent(rest.join('/')) };
}

function render() {
  const { name, arg } = route();
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === name || (name === 'queue' && a.dataset.view === 'scopes') || (name === 'task' && a.dataset.view === 'tasks'));
  views[name](arg);
}

// onSnapshot re-renders the live views; the others keep what the user
// is typing.
function onSnapshot() {
  const { name } = route();
  if (['overview', 'scopes', 'queue', 'nodes'].includes(name)) render();
  else if (name === 'tasks') refreshTasks(false);
}

function waiting() {
  if (!state.snap) { $('#view').innerHTML = '<p class="muted">waiting for the first snapshot…</p>'; return true; }
  return false;
}

function attention(snap) {
  const items = [];
  // Each request once (a scope counts one under every scope it may be
  // admitted by).
  const queued = snap.requests?.waiting ?? 0, inflight = snap.requests?.in_flight ?? 0;
  const failedMin = {};
  for (const p of state.points.slice(-60)) for (const [o, n] of Object.entries(p.failed || {})) failedMin[o] = (failedMin[o] || 0) + n;
  for (const [o, n] of Object.entries(failedMin)) items.push(`<span class="bad">${num(n)} ${esc(o)} in the last minute</span>`);
  for (const s of snap.scopes) {
    if (s.orphaned) items.push(`<span class="bad">${esc(s.name)} orphaned</span>`);
    else if (s.drained) items.push(`<span class="warn">${esc(s.name)} drained by an operator</span>`);
    else if (s.paused) items.push(`<span class="warn">${esc(s.name)} paused${s.paused_until ? ' until ' + esc(new Date(s.paused_until).toLocaleTimeString()) : ''}</span>`);
    if (s.held) items.push(`<span class="warn">${esc(s.name)} holds ${num(s.held)} for a passed-over waiter</span>`);
    if (s.limit_set) items.push(`<span class="warn">${esc(s.name)} limit set at run time (until reload)</span>`);
  }
  for (const n of snap.nodes) if (!n.connected) items.push(`<span class="bad">node ${esc(n.name)} disconnected</span>`);
  const f = snap.fleet;
  if (f && !f.synced && !f.leading) items.push('<span class="bad">this replica is NOT synced with the fleet leader: admissions fail</span>');
  return `<section class="strip" data-testid="summary">
<div class="big"><b data-testid="total-inflight">${num(inflight)}</b> in flight</div>
<div class="big"><b data-testid="total-queued">${num(queued)}</b> queued</div>
<div class="notes">${items.length ? items.join('') : '<span class="ok">nothing needs attention</span>'}</div></section>`;
}

function overview() {
  if (waiting()) return;
  const snap = state.snap;
  let html = attention(snap);
  if (snap.fleet) html += `<p class="muted">fleet epoch ${esc(snap.fleet.epoch)}, leader ${esc(snap.fleet.leader || 'none')}, this replica ${esc(snap.fleet.replica)}${snap.fleet.leading ? ' (leading)' : ''}${snap.fleet.catalog ? `, catalog version ${esc(snap.fleet.catalog.version)}${snap.fleet.catalog.drift ? ' (drift: this replica\'s file has another catalog)' : ''}` : ''}${snap.fleet.protocol && snap.fleet.protocol.refused ? `, fleet protocol refused: ${esc(snap.fleet.protocol.refused)}` : ''}</p>`;
  html += '<table class="models"><thead><tr><th>model</th><th>in flight / limit</th><th>queued</th><th>admitted/s</th><th>wait p50 (15 m)</th><th>wait p99 (15 m)</th><th>queued, then served (15 m)</th></tr></thead><tbody>';
  for (const m of snap.models) {
    const own = m.scopes.length > 0;
    const shares = (m.shares || []).length ? `<div class="muted small">shares ${(m.shares || []).map((sc) => esc(sc)).join(', ')} (below)</div>` : '';
    html += `<tr data-model="${esc(m.name)}"><td><b>${esc(m.name)}</b> <span class="muted">${esc(m.kind)}</span>${m.paused ? ' <span class="tag warn">paused</span>' : ''}${shares}</td>
<td data-testid="inflight">${own ? `${num(m.in_flight)} / ${limitText(m.limit)}` : '—'}</td><td data-testid="queued">${own ? num(m.queued) : '—'}</td><td>${num(m.admitted_per_s)}</td>
<td>${dur(m.p50_ms)}</td><td>${dur(m.p99_ms)}</td><td data-testid="queued-served">${num(m.queued_admitted)}</td></tr>`;
  }
  html += '</tbody></table>';
  if (!snap.models.length) html += '<p class="muted">the catalog has no models</p>';
  const shared = snap.shared || [];
  if (shared.length) {
    html += `<h3>Shared capacity</h3><p class="muted">Scopes that several models' candidates use (an edge provider serving several models): counted once here, not under each model; their requests may be any of those models'.</p>
<table data-testid="shared"><thead><tr><th>scope</th><th>serves</th><th>in flight / limit</th><th>queued</th></tr></thead><tbody>`;
    for (const r of shared) {
      html += `<tr data-shared="${esc(r.scope)}"><td><a href="#/queue/${encodeURIComponent(r.scope)}">${esc(r.scope)}</a>${r.paused ? ' <span class="tag warn">paused</span>' : ''}</td><td>${r.models.map((m) => esc(m)).join(', ')}</td>
<td>${num(r.in_flight)} / ${limitText(r.limit)}</td><td>${num(r.queued)}</td></tr>`;
    }
    html += '</tbody></table>';
  }
  for (const m of snap.models) {
    html += `<section class="model-charts"><h3>${esc(m.name)}</h3><div class="charts">`;
    html += chart('in flight, limit and queued', [
      { label: 'in flight', cls: 's1', values: series(m.name, (p) => p.in_flight || 0) },
      { label: 'limit', cls: 's3', dash: true, values: series(m.name, (p) => p.limit || 0) },
      { label: 'queued', cls: 's2', values: series(m.name, (p) => p.queued || 0) },
    ]);
    html += chart('admissions per second', [
      { label: 'admitted', cls: 's1', values: series(m.name, (p) => p.admitted || 0) },
      { label: 'after queueing', cls: 's2', values: series(m.name, (p) => p.queued_admitted || 0) },
    ]);
    html += chart('queue wait', [
      { label: 'p50', cls: 's1', values: series(m.name, (p) => p.p50_ms || 0) },
      { label: 'p99', cls: 's2', values: series(m.name, (p) => p.p99_ms || 0) },
    ], { unit: 'ms' });
    html += '</div></section>';
  }
  $('#view').innerHTML = html;
}

function scopeState(s) {
  const t = [];
  if (s.orphaned) t.push('<span class="tag bad">orphaned</span>');
  if (s.drained) t.push('<span class="tag warn">drained</span>');
  else if (s.paused) t.push(`<span class="tag warn">paused${s.paused_until ? ' until ' + esc(new Date(s.paused_until).toLocaleTimeString()) : ''}</span>`);
  if (s.shadow) {
    const w = s.would || {};
    t.push(`<span class="tag warn" title="its limits are judged, not enforced">shadow: would have made ${num(w.waits || 0)} wait, refused ${num(w.refusals || 0)}, timed out ${num(w.timeouts || 0)}</span>`);
  }
  if (s.limit_set) t.push('<span class="tag warn" title="set at run time: the next reload or restart applies the config\'s">limit set until reload</span>');
  return t.join(' ');
}

function rate(limit, left) { return limit ? `${num(left)} / ${num(limit)}` : '—'; }

function scopes() {
  if (waiting()) return;
  const snap = state.snap;
  const rows = snap.scopes.filter((s) => state.showKeys || !s.name.startsWith('key:'));
  let html = `<div class="bar"><h2>Scopes</h2><label><input type="checkbox" id="show-keys" ${state.showKeys ? 'checked' : ''}> per-key scopes</label>${snap.hidden_scopes ? `<span class="muted">${num(snap.hidden_scopes)} idle key scopes not shown</span>` : ''}</div>
<table data-testid="scopes"><thead><tr><th>scope</th><th>limit</th><th>in flight</th><th>held</th><th>queued</th><th>RPM left</th><th>TPM left</th><th>mean hold</th><th>state</th><th></th></tr></thead><tbody>`;
  for (const s of rows) {
    const pm = s.name.startsWith('pm:') ? s.name.slice(3) : null;
    const settable = pm || s.name.startsWith('group:') || s.name.startsWith('key:');
    const keyName = s.name.startsWith('key:') ? snap.key_names?.[s.name.slice(4)] : null;
    html += `<tr data-scope="${esc(s.name)}"><td><a href="#/queue/${encodeURIComponent(s.name)}">${esc(s.name)}</a>${keyName ? ` <span class="muted">${esc(keyName)}</span>` : ''}</td>
<td>${limitText(s.limit)}${settable ? ` <button class="quiet small" data-limit="${esc(s.name)}">set</button>` : ''}</td>
<td>${num(s.in_flight)}</td><td>${num(s.held || 0)}</td><td data-testid="waiting">${num(s.waiting)}</td>
<td>${rate(s.rpm, s.rpm_left)}</td><td>${rate(s.tpm, s.tpm_left)}</td><td>${esc(s.mean_hold || '—')}</td><td>${scopeState(s)}</td>
<td>${pm ? (s.drained ? `<button data-resume="${esc(pm)}">Resume</button>` : `<button class="warn" data-drain="${esc(pm)}">Drain</button>`) : ''}</td></tr>`;
  }
  html += '</tbody></table>';
  $('#view').innerHTML = html;
  $('#show-keys').onchange = (e) => { state.showKeys = e.target.checked; render(); };
  for (const b of document.querySelectorAll('[data-drain]')) b.onclick = () => act(`Drain platform model ${b.dataset.drain}? Nothing more is sent to it: what runs there runs on, and its waiters wait or go to their other candidates. The drain lasts until you resume it, through reloads and restarts, on every replica.`, 'Drain', '/console/api/drain', { platform_model: b.dataset.drain, drained: true });
  for (const b of document.querySelectorAll('[data-resume]')) b.onclick = () => act(`Resume platform model ${b.dataset.resume}? It takes requests again at once.`, 'Resume', '/console/api/drain', { platform_model: b.dataset.resume, drained: false });
  for (const b of document.querySelectorAll('[data-limit]')) b.onclick = () => setLimit(b.dataset.limit);
}

async function setLimit(scope) {
  const cur = state.snap.scopes.find((s) => s.name === scope);
  const v = prompt(`New concurrent limit for ${scope} (0: unlimited). Now ${cur ? limitText(cur.limit) : '?'}.\nIt holds until the next reload (SIGHUP) or restart of any replica, which apply the config's limit. Lowering it revokes nothing.`, cur ? cur.limit : '');
  if (v === null || v.trim() === '') return;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) { alertBox('a limit is a whole number, 0 or more'); return; }
  await act(`Set the limit of ${scope} to ${n === 0 ? 'unlimited' : n}, until the next reload or restart of any replica?`, 'Set limit', '/console/api/limit', { scope, limit: n });
}

let queueSeq = 0;
async function queue(scope) {
  const seq = ++queueSeq;
  const page = state.queuePage;
  if (page.scope !== scope) { page.scope = scope; page.offset = 0; }
  let q;
  try {
    q = await api(`/console/api/queue?scope=${encodeURIComponent(scope)}&offset=${page.offset}&limit=${QUEUE_PAGE}`);
  } catch (e) {
    $('#view').innerHTML = `<h2>${esc(scope)}</h2><p class="error">${esc(e.message)}</p>`;
    return;
  }
  if (seq !== queueSeq || route().name !== 'queue') return;
  const st = q.stats || {};
  let html = `<div class="bar"><h2>Queue of <span data-testid="queue-scope">${esc(q.scope)}</span></h2><a href="#/scopes">all scopes</a></div>
<p>limit ${limitText(st.limit)} · in flight ${num(st.in_flight)} · held for a passed-over waiter ${num(st.held || 0)} · <b data-testid="queue-count">${num(q.queued)}</b> queued ${scopeState(st)}</p>
<h3>Waiting, in the order they will be admitted</h3>${pager(q)}
<table data-testid="waiters"><thead><tr><th>#</th><th>waiter</th><th>priority</th><th>key</th><th>amount</th><th>waited</th><th>gives up in</th><th></th></tr></thead><tbody>`;
  for (const w of q.waiters) {
    html += `<tr data-waiter="${esc(w.id)}"><td data-testid="position">${w.position}</td><td><code>${esc(w.id)}</code>${w.task ? ' <span class="tag">task</span>' : ''}${w.holder ? ' <span class="tag warn" title="passed over past the fairness window: capacity is kept for it">held for</span>' : ''}</td>
<td>${w.priority}</td><td data-testid="waiter-key">${keyText(w.tenant, w.tenant_name)}</td><td>${num(w.amount)}</td><td>${dur(w.age_ms)}</td><td>${w.deadline_ms == null ? 'no deadline' : dur(w.deadline_ms)}</td>
<td><button class="danger small" data-cancel="${esc(w.id)}">Cancel</button></td></tr>`;
  }
  if (!q.waiters.length) html += `<tr><td colspan="8" class="muted">${q.offset > 0 && q.queued > 0 ? 'nobody waits this far back' : 'nobody waits'}</td></tr>`;
  html += `</tbody></table><h3>Held (${num(q.held)} leases)</h3>
<table data-testid="leases"><thead><tr><th>lease</th><th>waiter</th><th>owner</th><th>amount</th><th>held for</th><th>expires in</th></tr></thead><tbody>`;
  for (const l of q.leases) {
    html += `<tr><td><code>${esc(l.id)}</code></td><td><code>${esc(l.waiter_id)}</code></td><td>${esc(l.owner || '—')}</td><td>${num(l.amount)}</td><td>${l.age_ms == null ? 'not timed' : dur(l.age_ms)}</td><td>${l.expires_ms == null ? 'never' : dur(l.expires_ms)}</td></tr>`;
  }
  if (!q.leases.length) html += '<tr><td colspan="6" class="muted">nothing held</td></tr>';
  html += '</tbody></table>';
  $('#view').innerHTML = html;
  for (const b of document.querySelectorAll('[data-page]')) b.onclick = () => { page.offset = Math.max(0, Number(b.dataset.page)); queue(scope); };
  for (const b of document.querySelectorAll('[data-cancel]')) b.onclick = () => act(`Cancel waiter ${b.dataset.cancel}? It leaves the queue now; its client gets an error saying an operator removed it (a task is cancelled).`, 'Cancel it', '/console/api/waiters/cancel', { id: b.dataset.cancel });
}

// pager says which waiters of a queue a page shows and moves between
// pages.
function pager(q) {
  const from = q.waiters.length ? q.offset + 1 : 0, to = q.offset + q.waiters.length;
  const prev = q.offset > 0 ? `<button class="quiet small" data-page="${q.offset - q.limit}">← earlier</button>` : '';
  const next = to < q.queued ? `<button class="quiet small" data-page="${q.offset + q.limit}">later →</button>` : '';
  return `<p class="pager" data-testid="pager">${prev} waiters <b>${num(from)}–${num(to)}</b> of ${num(q.queued)} ${next}</p>`;
}

const STATUSES = ['queued', 'admitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

function tasks() {
  const models = (state.snap?.models || []).map((m) => m.name);
  const f = state.taskFilter;
  $('#view').innerHTML = `<div class="bar"><h2>Tasks</h2>
<label>status <select id="task-status"><option value="">any</option>${STATUSES.map((s) => `<option ${f.status === s ? 'selected' : ''}>${s}</option>`).join('')}</select></label>
<label>model <select id="task-model"><option value="">any</option>${models.map((m) => `<option ${f.model === m ? 'selected' : ''}>${esc(m)}</option>`).join('')}</select></label></div>
<table data-testid="tasks"><thead><tr><th>task</th><th>model</th><th>status</th><th>key</th><th>platform model</th><th>progress</th><th>created</th><th></th></tr></thead><tbody id="task-rows"><tr><td colspan="8" class="muted">loading…</td></tr></tbody></table>`;
  $('#task-status').onchange = (e) => { f.status = e.target.value; refreshTasks(true); };
  $('#task-model').onchange = (e) => { f.model = e.target.value; refreshTasks(true); };
  refreshTasks(true);
}

let tasksSeq = 0;
async function refreshTasks() {
  const seq = ++tasksSeq;
  const f = state.taskFilter;
  const qs = new URLSearchParams();
  if (f.status) qs.set('status', f.status);
  if (f.model) qs.set('model', f.model);
  let res;
  try { res = await api('/console/api/tasks?' + qs); } catch (e) { alertBox(e.message); return; }
  const body = $('#task-rows');
  if (seq !== tasksSeq || !body) return;
  body.innerHTML = res.tasks.map((t) => `<tr data-task="${esc(t.id)}" data-status="${esc(t.status)}"><td><a href="#/task/${encodeURIComponent(t.id)}"><code>${esc(t.id)}</code></a></td><td>${esc(t.model)}</td>
<td><span class="tag st-${esc(t.status)}">${esc(t.status)}</span></td><td data-testid="task-key">${keyText(t.key_id, t.key_name)}</td><td>${esc(t.platform_model || '—')}</td><td>${t.progress}%</td><td>${ago(t.created_at)}</td>
<td>${['queued', 'admitted', 'running'].includes(t.status) ? `<button class="danger small" data-cancel-task="${esc(t.id)}">Cancel</button>` : ''}</td></tr>`).join('') || '<tr><td colspan="8" class="muted">no tasks</td></tr>';
  for (const b of body.querySelectorAll('[data-cancel-task]')) b.onclick = () => cancelTask(b.dataset.cancelTask);
}

function cancelTask(id) {
  return act(`Cancel task ${id}? A queued task leaves its queue; a running one is stopped upstream. Its callback, if any, gets task.cancelled.`, 'Cancel task', `/console/api/tasks/${encodeURIComponent(id)}/cancel`, {}, () => alertBox(`task ${id} cancelled`, 'ok'));
}

async function taskDetail(id) {
  let d;
  try { d = await api(`/console/api/tasks/${encodeURIComponent(id)}`); } catch (e) { $('#view').innerHTML = `<p class="error">${esc(e.message)}</p>`; return; }
  const t = d.task;
  const live = ['queued', 'admitted', 'running'].includes(t.status);
  let html = `<div class="bar"><h2>Task <code>${esc(t.id)}</code></h2><a href="#/tasks">all tasks</a>${live ? `<button class="danger" id="cancel-this">Cancel</button>` : ''}</div>
<dl class="fields"><dt>status</dt><dd data-testid="task-status"><span class="tag st-${esc(t.status)}">${esc(t.status)}</span></dd><dt>model</dt><dd>${esc(t.model)} (${esc(t.kind)})</dd>
<dt>key</dt><dd>${keyText(t.key_id, t.key_name)}</dd><dt>priority</dt><dd>${t.priority}</dd><dt>platform model</dt><dd>${esc(t.platform_model || '—')}</dd>
<dt>progress</dt><dd>${t.progress}%</dd><dt>attempts</dt><dd>${t.attempts}</dd><dt>upstream job</dt><dd>${esc(t.upstream_id || '—')}</dd>
<dt>callback</dt><dd>${esc(t.callback_url || 'none')}</dd>${d.position ? `<dt>queue</dt><dd>${num(d.position.ahead)} ahead of ${num(d.position.queued)} on ${esc(d.position.scope)}, about ${dur(d.position.estimated_wait_ms)}</dd>` : ''}
${t.deadline ? `<dt>expires if still queued</dt><dd>${esc(new Date(t.deadline).toLocaleString())}</dd>` : ''}</dl>
<h3>Events</h3><table><thead><tr><th>when</th><th>event</th><th>detail</th></tr></thead><tbody>`;
  for (const e of d.events) html += `<tr><td>${e.at ? esc(new Date(e.at).toLocaleString()) : '—'}</td><td>${esc(e.event)}</td><td>${esc(e.detail)}</td></tr>`;
  html += '</tbody></table>';
  if (d.deliveries) {
    html += `<h3>Callback deliveries</h3>${d.deliveries_error ? `<p class="error">${esc(d.deliveries_error)}</p>` : ''}<table data-testid="deliveries"><thead><tr><th>event</th><th>state</th><th>tries</th><th>last try</th><th>next try</th><th>failures</th></tr></thead><tbody>`;
    for (const v of d.deliveries) {
      const fails = v.errors.map((e) => `#${e.attempt} ${esc(new Date(e.at).toLocaleTimeString())}: ${esc(e.error)}`).join('<br>');
      html += `<tr><td>${esc(v.type)} <span class="muted">${esc(v.event_id)}</span></td><td>${esc(v.state)}</td><td>${v.attempts} of ${v.max_attempts}</td>
<td>${v.attempted_at ? esc(new Date(v.attempted_at).toLocaleString()) : '—'}</td><td>${v.next_at ? esc(new Date(v.next_at).toLocaleString()) : '—'}</td><td>${fails || '—'}</td></tr>`;
    }
    if (!d.deliveries.length) html += '<tr><td colspan="6" class="muted">no event queued yet</td></tr>';
    html += '</tbody></table>';
  }
  html += `<h3>Input</h3><pre>${esc(JSON.stringify(d.input, null, 2))}</pre>`;
  if (d.result) html += `<h3>Result</h3><pre>${esc(JSON.stringify(d.result, null, 2))}</pre>`;
  $('#view').innerHTML = html;
  if (live) $('#cancel-this').onclick = () => cancelTask(t.id);
}

async function keys() {
  let res;
  try { res = await api('/console/api/keys'); } catch (e) { $('#view').innerHTML = `<p class="error">${esc(e.message)}</p>`; return; }
  let html = `<div class="bar"><h2>Keys</h2></div>
<form id="new-key" class="inline"><input name="name" placeholder="name" required maxlength="200"><input name="group" placeholder="group (default)"><button type="submit">Create key</button></form>`;
  if (state.secret) {
    html += `<div class="secret" data-testid="secret"><p>The secret of <b>${esc(state.secret.name || state.secret.id)}</b>, shown only now: store it safely.</p><code>${esc(state.secret.secret)}</code> <button class="quiet small" id="hide-secret">Done</button></div>`;
  }
  html += `<table data-testid="keys"><thead><tr><th>key</th><th>name</th><th>group</th><th>models</th><th>requests</th><th>failed</th><th>tokens</th><th>last used</th><th>created</th><th>state</th><th></th></tr></thead><tbody>`;
  for (const k of res.keys) {
    html += `<tr data-key="${esc(k.id)}"><td><code>${esc(k.id)}</code> <span class="muted">${esc(k.prefix)}…</span></td><td>${esc(k.name)}</td><td>${esc(k.group)}</td><td>${esc((k.models || []).join(', ') || 'all')}</td>
<td>${num(k.usage.requests)}</td><td>${num(k.usage.failed)}</td><td>${num(k.usage.tokens)}</td><td>${ago(k.usage.last)}</td><td>${ago(k.created_at)}</td>
<td data-testid="key-state">${k.revoked_at ? '<span class="tag bad">revoked</span>' : '<span class="tag ok">active</span>'}</td>
<td>${k.revoked_at ? '' : `<button class="danger small" data-revoke="${esc(k.id)}">Revoke</button>`}</td></tr>`;
  }
  html += `</tbody></table><p class="muted">Usage: ${esc(res.usage_window)}. A revoked key stops working within the key cache's TTL (server.key_cache_ttl, 2 s).</p>`;
  $('#view').innerHTML = html;
  $('#new-key').onsubmit = async (e) => {
    e.preventDefault();
    const fd = new FormData(e.target);
    try {
      state.secret = await api('/console/api/keys', { body: { name: fd.get('name'), group: fd.get('group') || '' } });
      keys();
    } catch (err) { alertBox(err.message); }
  };
  if (state.secret) $('#hide-secret').onclick = () => { state.secret = null; keys(); };
  for (const b of document.querySelectorAll('[data-revoke]')) b.onclick = () => act(`Revoke key ${b.dataset.revoke}? Its requests are refused from now on (within 2 s); this cannot be undone.`, 'Revoke', `/console/api/keys/${encodeURIComponent(b.dataset.revoke)}/revoke`, {}, () => alertBox(`key ${b.dataset.revoke} revoked`, 'ok'));
}

// ---- spend ----

let spendSeq = 0;
async function spend() {
  const seq = ++spendSeq;
  const f = state.spend;
  const qs = new URLSearchParams({ window: f.window });
  if (f.subject) qs.set('subject', f.subject);
  let p;
  try { p = await api('/console/api/spend?' + qs); } catch (e) { $('#view').innerHTML = `<h2>Spend</h2><p class="error">${esc(e.message)}</p>`; return; }
  if (seq !== spendSeq || route().name !== 'spend') return;
  const day = (t) => new Date(t).toISOString().slice(0, 10);
  const last = new Date(new Date(p.until).getTime() - 1);
  let html = `<div class="bar"><h2>Spend</h2>
<label>window <select id="spend-window">${['day', 'week', 'month'].map((w) => `<option value="${w}" ${f.window === w ? 'selected' : ''}>this ${w}</option>`).join('')}</select></label>
<span>${esc(day(p.from))}${f.window === 'day' ? '' : ` – ${esc(day(last))}`} (UTC) · total <b data-testid="spend-total">${esc(p.total)}</b></span>
<button class="quiet small" id="spend-refresh">Refresh</button></div>`;
  if (p.budgets_error) html += `<p class="error">${esc(p.budgets_error)}</p>`;
  html += spendChart(p);
  html += spendTable('Groups', 'spend-groups', p.groups) + spendTable('Keys', 'spend-keys', p.keys);
  if (p.hidden_keys) html += `<p class="muted">${num(p.hidden_keys)} more keys spent less and are not listed.</p>`;
  html += `<p class="muted">Spend is summed from the usage records (every replica's, a few seconds behind). Each budget's bar is its own window's spend: amber from its first alert threshold, red once it is used up.</p>`;
  $('#view').innerHTML = html;
  $('#spend-window').onchange = (e) => { f.window = e.target.value; spend(); };
  $('#spend-subject').onchange = (e) => { f.subject = e.target.value; spend(); };
  $('#spend-refresh').onclick = () => spend();
  for (const b of document.querySelectorAll('[data-chart]')) b.onclick = () => { f.subject = b.dataset.chart; spend(); };
}

// spendTable lists rows (keys or groups) with their spend and budgets.
function spendTable(title, testid, rows) {
  let html = `<h3>${title}</h3><table data-testid="${testid}"><thead><tr><th>${title === 'Keys' ? 'key' : 'group'}</th><th>spent</th><th>budgets</th><th>requests</th><th>tokens</th><th>estimated</th><th></th></tr></thead><tbody>`;
  for (const r of rows) {
    const who = r.subject.startsWith('key:') ? keyText(r.id, r.name) : esc(r.id || '(none)');
    html += `<tr data-subject="${esc(r.subject)}"><td>${who}</td><td data-testid="spent"><b>${esc(r.spent)}</b></td><td>${r.budgets.map(budgetBar).join('') || '<span class="muted">none</span>'}</td>
<td>${num(r.requests)}</td><td>${num(r.tokens)}</td><td>${r.estimated ? num(r.estimated) : '—'}</td><td><button class="quiet small" data-chart="${esc(r.subject)}">chart</button></td></tr>`;
  }
  if (!rows.length) html += `<tr><td colspan="7" class="muted">no spend and no budget in this window</td></tr>`;
  return html + '</tbody></table>';
}

// amount writes a chart's axis amount to three significant digits (the
// tables show money exactly, as the gateway writes it).
const amount = (v) => Number(v).toLocaleString('en-US', { maximumSignificantDigits: 3 });

// budgetBar is one budget: a bar of the share of it used (red past its
// amount, amber past its first alert threshold) and the figures.
function budgetBar(u) {
  const pct = Math.max(0, u.used_pct);
  const mark = u.alert && u.alert < 100 ? `<line class="mark" x1="${u.alert}" y1="0" x2="${u.alert}" y2="8"/>` : '';
  return `<div class="budget" data-testid="budget" data-level="${esc(u.level)}" title="${esc(u.id)}: ${esc(new Date(u.window_start).toLocaleString())} – ${esc(new Date(u.window_end).toLocaleString())}">
<svg class="meter" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="${pct.toFixed(0)}% used"><rect class="track" width="100" height="8"/><rect class="fill lvl-${esc(u.level)}" width="${Math.min(pct, 100).toFixed(2)}" height="8"/>${mark}</svg>
<span class="${u.level === 'over' ? 'bad' : u.level === 'warn' ? 'warn' : ''}">${pct < 10 ? pct.toFixed(1) : num(Math.round(pct))}%</span> ${esc(u.spent)} of ${esc(u.amount)} / ${esc(u.window)}${u.zone ? ` ${esc(u.zone)}` : ''} <span class="tag">${esc(u.mode)}</span></div>`;
}

// spendChart draws the window's spend as a bar per bucket, the total's
// or one subject's, with a choice of whose.
function spendChart(p) {
  const ch = p.chart, f = state.spend;
  const opts = [...p.groups.map((g) => [g.subject, `group ${g.id || '(none)'}`]), ...p.keys.map((k) => [k.subject, `key ${k.name || k.id}`])];
  if (ch.subject && !opts.some(([v]) => v === ch.subject)) opts.push([ch.subject, ch.subject]);
  const pick = `<select id="spend-subject"><option value="">everyone</option>${opts.map(([v, l]) => `<option value="${esc(v)}" ${f.subject === v ? 'selected' : ''}>${esc(l)}</option>`).join('')}</select>`;
  const W = 840, H = 160, L = 54, B = 18, T = 10;
  const step = ch.bucket === 'hour' ? 3600e3 : 86400e3;
  const slots = Math.max(1, Math.round((new Date(p.until) - new Date(p.from)) / step));
  const vals = ch.points.map((pt) => Number(pt.cost));
  const max = niceCeil(Math.max(...vals, 0) || 1);
  const bw = (W - L - 4) / slots;
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const bars = vals.map((v, i) => `<rect class="spend-bar" x="${(L + i * bw + 1).toFixed(1)}" y="${y(v).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${(y(0) - y(v)).toFixed(1)}"><title>${esc(new Date(ch.points[i].t).toISOString().slice(0, ch.bucket === 'hour' ? 16 : 10).replace('T', ' '))}: ${esc(ch.points[i].cost)}</title></rect>`).join('');
  const first = new Date(p.from).toISOString().slice(0, 10);
  return `<figure class="chart wide" data-testid="spend-chart"><figcaption>Spend by ${esc(ch.bucket)} (UTC) of ${pick}</figcaption>
<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="spend by ${esc(ch.bucket)}">
<line class="axis" x1="${L}" y1="${y(0)}" x2="${W - 4}" y2="${y(0)}"/><line class="grid" x1="${L}" y1="${y(max)}" x2="${W - 4}" y2="${y(max)}"/><line class="grid" x1="${L}" y1="${y(max / 2)}" x2="${W - 4}" y2="${y(max / 2)}"/>
<text x="${L - 4}" y="${y(max) + 4}" text-anchor="end">${esc(amount(max))}</text><text x="${L - 4}" y="${y(max / 2) + 4}" text-anchor="end">${esc(amount(max / 2))}</text><text x="${L - 4}" y="${y(0) + 4}" text-anchor="end">0</text>
<text x="${L}" y="${H - 4}">${esc(first)}</text><text x="${W - 4}" y="${H - 4}" text-anchor="end">${ch.bucket === 'hour' ? '24:00' : esc(new Date(new Date(p.until) - 1).toISOString().slice(0, 10))}</text>
${bars}</svg></figure>`;
}

function nodes() {
  if (waiting()) return;
  const ns = state.snap.nodes;
  let html = '<div class="bar"><h2>Edge nodes</h2></div>';
  if (!ns.length) html += '<p class="muted">no node has registered since the gateway started (or it has no edge listener)</p>';
  for (const n of ns) {
    html += `<section class="node" data-node="${esc(n.name)}"><h3>${esc(n.name)} <span class="tag ${n.connected ? 'ok' : 'bad'}">${n.connected ? 'connected' : 'disconnected'}</span>${n.draining ? ' <span class="tag warn">draining</span>' : ''}</h3>
<p class="muted">id ${esc(n.id)} · generation ${esc(n.generation)} · last heartbeat ${dur(n.last_seen_ms)} ago · ${num(n.ready_streams || 0)} streams ready</p>
<table><thead><tr><th>provider</th><th>adapter</th><th>models</th><th>slots used</th><th>long slots</th><th>queued</th><th>health</th><th>state</th></tr></thead><tbody>`;
    for (const p of n.providers) {
      html += `<tr><td>${esc(p.id)}</td><td>${esc(p.adapter)} <span class="muted">${esc(p.target)}</span></td><td>${esc((p.models || []).join(', '))}</td><td>${num(p.used)} / ${num(p.slots)}</td>
<td>${p.long_slots ? `${num(p.long_used)} / ${num(p.long_slots)}` : '—'}</td><td>${num(p.queued)}</td><td><span class="tag ${p.health === 'available' ? 'ok' : 'bad'}">${esc(p.health)}</span></td>
<td>${p.orphaned ? '<span class="tag bad">orphaned</span>' : ''}${p.paused ? ' <span class="tag warn">paused</span>' : ''}</td></tr>`;
    }
    html += '</tbody></table></section>';
  }
  $('#view').innerHTML = html;
}

// ---- start ----

window.addEventListener('hashchange', render);
const logout = $('#logout');
if (logout) logout.onclick = async () => { try { await api('/console/logout', { body: {} }); } finally { location.href = '/'; } };
render();
connect();
