// delayd console: one page over the server's JSON API (/api/v1), no
// framework, no build step. Hash routes:
//   #/                          overview, one row per topic, refreshed live;
//                               fire lateness; due-soon charts
//   #/topics/{t}/jobs?filters   a topic's jobs, 50 a page; due-soon charts
//   #/topics/{t}/jobs/{id}      one job: fields, payload, Cancel, Reschedule
//   #/dead?topic=               dead letters: Inspect, Redrive, Cancel
// Ids, payloads, labels and errors come from clients: every node is built
// with createElement and textContent, never from HTML strings. Calls that
// change state are POSTs carrying the page's CSRF token (X-CSRF-Token).
'use strict';

const API = '/api/v1';
const PAGE_SIZE = 50;
const REFRESH_MS = 1000;
const CHART_REFRESH_MS = 10000;
// Fire-lateness percentiles are over the deliveries of about this long.
const LATENESS_WINDOW_MS = 10000;
const PERCENTILES = [['p50', 0.5], ['p90', 0.9], ['p99', 0.99]];
const STATES = ['SCHEDULED', 'READY', 'IN_FLIGHT', 'DEAD', 'DONE',
  'CANCELED', 'PAUSED'];
// The overview's columns: TopicStats fields in JSON and their headings.
const STAT_FIELDS = [
  ['scheduled', 'Scheduled'], ['ready', 'Ready'], ['inFlight', 'In flight'],
  ['dead', 'Dead'], ['done', 'Done'], ['canceled', 'Canceled'],
  ['subscribers', 'Subscribers'], ['dueNextMinute', 'Due 1 min'],
  ['dueNextHour', 'Due 1 h'], ['dueNextDay', 'Due 1 day'],
  ['fired', 'Fired'], ['acked', 'Acked'],
];
// Columns of per-second rates: [counter, column, heading].
const RATE_FIELDS = [['fired', 'firedRate', 'Fired/s'], ['acked', 'ackedRate', 'Acked/s']];

// Bumped on every route change: a reply for an older view is dropped.
let generation = 0;
let refreshTimer = null;
let chartTimer = null;

// ---------------------------------------------------------------- DOM

// el('a', {href: '#/', text: 'x'}, child...): attributes, `text` as
// textContent, `on<event>` as listeners; children are nodes or strings
// (strings become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

function byId(id) { return document.getElementById(id); }

function link(href, text, attrs) {
  return el('a', Object.assign({href, text}, attrs || {}));
}

// svg('rect', {x: 0, class: 'bar'}, child...): as el(), in SVG's namespace.
function svg(tag, attrs, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === 'text') node.textContent = value;
    else node.setAttribute(key, String(value));
  }
  node.append(...children);
  return node;
}

function button(text, onclick, attrs) {
  return el('button', Object.assign({type: 'button', text, onclick},
    attrs || {}));
}

// ------------------------------------------------------------ status line

function showStatus(message, kind) {
  const line = byId('status');
  line.textContent = message;
  line.className = kind;
  line.hidden = false;
}

function showError(error) { showStatus(error.message || String(error), 'error'); }

function clearStatus() { showStatus('', ''); byId('status').hidden = true; }

// -------------------------------------------------------------------- API

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : '';
}

// One call; resolves to the reply's JSON, rejects with an Error whose
// message is the API's error ("NOT_FOUND (404): key: no job ...").
async function api(method, path, body) {
  const init = {method, headers: {}, credentials: 'same-origin'};
  if (method !== 'GET') {
    init.headers['X-CSRF-Token'] = csrfToken();
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body || {});
  }
  const reply = await fetch(API + path, init).catch(e => {
    throw new Error(`${method} ${path}: server unreachable (${e.message})`);
  });
  const text = await reply.text();
  let data = null;
  try { data = JSON.parse(text); } catch (e) { /* reported below */ }
  if (!reply.ok) {
    const err = data && data.error;
    throw new Error(err ? `${err.status} (${err.code}): ${err.message}`
      : `HTTP ${reply.status}: ${text.slice(0, 200)}`);
  }
  if (data === null) throw new Error(`${method} ${path}: reply is not JSON`);
  return data;
}

const enc = encodeURIComponent;
function topicPath(topic) { return '/topics/' + enc(topic); }
function jobPath(topic, id) { return topicPath(topic) + '/jobs/' + enc(id); }

function cancelJob(topic, id) {
  return api('POST', jobPath(topic, id) + ':cancel');
}

function redrive(topic, id) {
  return api('POST', topicPath(topic) + ':redrive',
    id === undefined ? {} : {id});
}

// ------------------------------------------------------------- formatting

function stateName(state) { return String(state || '').replace(/^JOB_STATE_/, ''); }

// "2026-11-24T14:27:15.229Z (in 5m)", or an em dash when unset.
function timeText(ts) {
  const ms = Date.parse(ts);
  if (!ts || Number.isNaN(ms)) return ts || '\u2014';
  const delta = Math.round((ms - Date.now()) / 1000);
  const s = Math.abs(delta);
  const span = s < 90 ? s + 's' : s < 5400 ? Math.round(s / 60) + 'm'
    : s < 129600 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd';
  return `${ts} (${delta >= 0 ? 'in ' + span : span + ' ago'})`;
}

function base64Bytes(b64) {
  const binary = atob(b64 || '');
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function utf8OrNull(bytes) {
  try { return new TextDecoder('utf-8', {fatal: true}).decode(bytes); } catch (e) { return null; }
}

// 16 bytes a line: "0000  3c 73 63 ...".
function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16),
      b => b.toString(16).padStart(2, '0'));
    lines.push(i.toString(16).padStart(4, '0') + '  ' + row.join(' '));
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------- routing

function hashJobs(topic, filters) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(filters || {})) {
    if (value) query.set(key, value);
  }
  const qs = query.toString();
  return '#/topics/' + enc(topic) + '/jobs' + (qs ? '?' + qs : '');
}

function hashJob(topic, id) { return '#/topics/' + enc(topic) + '/jobs/' + enc(id); }

function parseHash() {
  const hash = location.hash.replace(/^#/, '');
  const q = hash.indexOf('?');
  const path = q < 0 ? hash : hash.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : hash.slice(q + 1));
  const parts = path.split('/').filter(p => p !== '').map(p => {
    try { return decodeURIComponent(p); } catch (e) { return p; }
  });
  return {parts, params};
}

function route() {
  generation++;
  clearTimeout(refreshTimer);
  clearTimeout(chartTimer);
  clearStatus();
  const view = byId('view');
  view.replaceChildren();
  const {parts, params} = parseHash();
  let nav = '';
  if (parts.length === 0) {
    nav = 'nav-overview';
    renderOverview(view);
  } else if (parts.length === 1 && parts[0] === 'dead') {
    nav = 'nav-dead';
    renderDead(view, params.get('topic') || '');
  } else if (parts.length === 3 && parts[0] === 'topics' && parts[2] === 'jobs') {
    renderJobs(view, parts[1], params);
  } else if (parts.length === 4 && parts[0] === 'topics' && parts[2] === 'jobs') {
    renderDetail(view, parts[1], parts[3]);
  } else {
    view.append(el('h1', {text: 'Not found'}), link('#/', 'Back to the overview'));
  }
  for (const a of document.querySelectorAll('.topbar nav a')) {
    a.classList.toggle('active', a.id === nav);
  }
}

// Runs a view's async work; an error shows in the status line unless the
// view has been left meanwhile.
function guarded(work) {
  const gen = generation;
  work(() => gen === generation).catch(e => { if (gen === generation) showError(e); });
}

// --------------------------------------------------------------- overview

function renderOverview(view) {
  document.title = 'delayd console';
  const head = el('tr', {}, el('th', {text: 'Topic'}),
    ...STAT_FIELDS.map(([, label]) => el('th', {text: label, class: 'num'})),
    ...RATE_FIELDS.map(([, , label]) => el('th', {text: label, class: 'num'})));
  view.append(
    el('h1', {text: 'Topics'}),
    el('p', {id: 'updated', class: 'muted', text: 'Loading\u2026'}),
    el('table', {id: 'overview'}, el('thead', {}, head), el('tbody')),
    el('p', {id: 'no-topics', class: 'muted', text: 'No topics yet.', hidden: true}),
    el('h2', {}, 'Fire lateness ', el('span', {id: 'lateness-window', class: 'muted'})),
    el('p', {id: 'lateness'}, ...PERCENTILES.map(([name]) =>
      el('span', {class: 'percentile', 'data-q': name, text: name + ' \u2013'}))),
    dueSoonBox(''));
  refreshOverview(generation, {last: null, lateness: []});
}

// Fetches the stats and updates the table in place, then again in
// REFRESH_MS while the overview stays open. `samples` holds the previous
// reply (for rates) and those of the lateness window.
async function refreshOverview(gen, samples) {
  try {
    const stats = await api('GET', '/stats');
    if (gen !== generation) return;
    const sample = {ms: performance.now(), stats};
    updateOverview(stats.topics || [], sample, samples.last);
    updateLateness(samples.lateness, sample);
    samples.last = sample;
    byId('updated').textContent = 'Live \u00b7 updated ' + new Date().toLocaleTimeString();
    if (byId('status').className === 'error') clearStatus();
  } catch (e) {
    if (gen !== generation) return;
    showError(e);
  }
  refreshTimer = setTimeout(() => refreshOverview(gen, samples), REFRESH_MS);
}

function updateOverview(topics, sample, last) {
  const tbody = byId('overview').tBodies[0];
  const rows = new Map(Array.from(tbody.rows, row => [row.dataset.topic, row]));
  const before = new Map(last ? (last.stats.topics || []).map(t => [t.topic, t]) : []);
  topics.forEach((stats, index) => {
    let row = rows.get(stats.topic);
    if (!row) row = overviewRow(stats.topic);
    rows.delete(stats.topic);
    if (tbody.rows[index] !== row) tbody.insertBefore(row, tbody.rows[index] || null);
    for (const [field] of STAT_FIELDS) setStatCell(row, field, String(stats[field] ?? 0));
    const old = before.get(stats.topic);
    for (const [counter, field] of RATE_FIELDS) {
      row.querySelector(`td[data-field="${field}"]`).textContent = old
        ? rateText(stats[counter], old[counter], sample.ms - last.ms) : '\u2013';
    }
  });
  for (const gone of rows.values()) gone.remove();
  byId('no-topics').hidden = topics.length > 0;
}

function overviewRow(topic) {
  const row = el('tr', {'data-topic': topic},
    el('td', {'data-field': 'topic'}, link(hashJobs(topic), topic)));
  for (const [field] of STAT_FIELDS) {
    const cell = el('td', {'data-field': field, class: 'num'});
    if (field === 'dead') cell.append(link('#/dead?topic=' + enc(topic), ''));
    row.append(cell);
  }
  for (const [, field] of RATE_FIELDS) row.append(el('td', {'data-field': field, class: 'num'}));
  return row;
}

// Per second, from two readings of a counter `ms` apart; a dash when the
// counter went down (the server restarted).
function rateText(count, before, ms) {
  const rate = (Number(count) - Number(before)) * 1000 / ms;
  if (!(rate >= 0)) return '\u2013';
  return rate < 10 ? rate.toFixed(1) : String(Math.round(rate));
}

// Shows the fire-lateness percentiles of the deliveries since the oldest of
// `samples` (kept: the newest at least LATENESS_WINDOW_MS old, and those
// after it) when there were any, else since the server started.
function updateLateness(samples, sample) {
  samples.push(sample);
  while (samples.length > 1 && sample.ms - samples[1].ms >= LATENESS_WINDOW_MS) samples.shift();
  const buckets = sample.stats.fireLateness || [];
  const base = samples[0].stats.fireLateness || [];
  let counts = buckets.map(b => Number(b.count));
  let window = 0;
  if (samples.length > 1 && base.length === counts.length) {
    const delta = counts.map((n, i) => n - Number(base[i].count));
    if (delta[delta.length - 1] > 0) {
      counts = delta;
      window = sample.ms - samples[0].ms;
    }
  }
  const total = counts[counts.length - 1] || 0;
  const box = byId('lateness');
  box.dataset.window = window ? 'interval' : 'start';
  byId('lateness-window').textContent = (window
    ? `last ${Math.round(window / 1000)} s` : 'since start') + ` \u00b7 ${total} deliveries`;
  for (const [name, q] of PERCENTILES) {
    box.querySelector(`[data-q="${name}"]`).textContent =
      `${name} ${percentileText(buckets, counts, q)}`;
  }
}

// The upper bound of the first bucket whose cumulative count reaches
// q * total: "\u2264 5 ms", or "> 300 s" in the +Inf bucket; a dash when
// there is no delivery.
function percentileText(buckets, counts, q) {
  const total = counts[counts.length - 1];
  if (!total) return '\u2013';
  const i = counts.findIndex(n => n >= q * total);
  const le = Number(buckets[i].leSeconds);
  if (le !== Infinity) return '\u2264 ' + secondsText(le);
  return '> ' + (i > 0 ? secondsText(Number(buckets[i - 1].leSeconds)) : '0 s');
}

function secondsText(s) {
  return s < 1 ? `${Number((s * 1000).toPrecision(3))} ms` : `${s} s`;
}

// Sets a cell's count; a changed count flashes until the next refresh.
function setStatCell(row, field, value) {
  const cell = row.querySelector(`td[data-field="${field}"]`);
  const target = cell.firstElementChild || cell;
  const changed = target.textContent !== '' && target.textContent !== value;
  target.textContent = value;
  cell.classList.toggle('changed', changed);
  if (field === 'dead') cell.classList.toggle('alert', value !== '0');
}

// ---------------------------------------------------------------- due soon

// "Due soon": the jobs due per minute over the next hour and per hour over
// the next day, of `topic` ('' for every topic), as bar charts refreshed
// every CHART_REFRESH_MS while the view is shown.
function dueSoonBox(topic) {
  const from = el('span', {class: 'muted', id: 'due-soon-from'});
  const minutes = el('figure', {id: 'due-per-minute'});
  const hours = el('figure', {id: 'due-per-hour'});
  const box = el('section', {id: 'due-soon'}, el('h2', {}, 'Due soon ', from),
    el('div', {class: 'charts'}, minutes, hours));
  const query = new URLSearchParams(topic ? {topic, dueSoon: 'true'} : {dueSoon: 'true'});
  const gen = generation;
  async function refresh() {
    try {
      const {dueSoon} = await api('GET', '/stats?' + query);
      if (gen !== generation) return;
      if (!dueSoon) throw new Error('GET /stats: no dueSoon in the reply');
      box.dataset.from = dueSoon.from;
      from.textContent = 'from ' + new Date(dueSoon.from).toLocaleTimeString();
      setChart(minutes, 'Per minute, next hour', dueSoon.perMinute, 'm');
      setChart(hours, 'Per hour, next day', dueSoon.perHour, 'h');
    } catch (e) {
      if (gen !== generation) return;
      showError(e);
    }
    chartTimer = setTimeout(refresh, CHART_REFRESH_MS);
  }
  refresh();
  return box;
}

function setChart(figure, caption, counts, unit) {
  const total = counts.reduce((sum, n) => sum + Number(n), 0);
  figure.dataset.total = total;
  figure.replaceChildren(el('figcaption', {text: `${caption} \u00b7 ${total} jobs`}),
    barChart(counts, unit));
}

// Bar i holds counts[i] (uint64 strings), the jobs due from +i to +i+1
// units; its <title> is the tooltip. The tallest bar is `max`.
function barChart(counts, unit) {
  const width = 600, top = 16, plot = 90, bottom = top + plot;
  const step = width / Math.max(counts.length, 1);
  const max = Math.max(0, ...counts.map(Number));
  const bars = counts.map((count, i) => {
    const n = Number(count);
    const h = n === 0 ? 0 : Math.max(2, plot * n / max);
    return svg('g', {class: 'bar', 'data-count': count},
      svg('title', {text: `+${i}${unit} to +${i + 1}${unit}: ${count} job${n === 1 ? '' : 's'}`}),
      svg('rect', {class: 'slot', x: i * step, y: top, width: step, height: plot}),
      svg('rect', {class: 'fill', x: i * step + step / 10, y: bottom - h, width: step * 0.8,
        height: h}));
  });
  const label = (x, anchor, text) => svg('text', {x, y: bottom + 14, 'text-anchor': anchor, text});
  return svg('svg', {class: 'chart', viewBox: `0 0 ${width} ${bottom + 18}`, role: 'img'},
    svg('text', {class: 'max', x: 0, y: 11, text: `max ${max}`}), ...bars,
    svg('line', {class: 'axis', x1: 0, y1: bottom, x2: width, y2: bottom}),
    label(0, 'start', `+0${unit}`), label(width / 2, 'middle', `+${counts.length / 2}${unit}`),
    label(width, 'end', `+${counts.length}${unit}`));
}

// ------------------------------------------------------------- job tables

// A table of one topic's jobs matching `query` (ListJobs parameters), one
// page at a time: Next follows nextPageToken, Back goes to the token on top
// of a stack of those used before. `actions(job, table)` adds a cell of
// buttons to each row.
function jobTable(topic, query, actions) {
  const headings = ['ID', 'State', 'Attempts', 'Fire at', 'Last error'];
  if (actions) headings.push('Actions');
  const stack = [];
  let token = '';
  let nextToken = '';
  const tbody = el('tbody');
  const back = button('\u2190 Back', () => go(stack[stack.length - 1], -1), {class: 'page-back'});
  const next = button('Next \u2192', () => go(nextToken, +1), {class: 'page-next'});
  const info = el('span', {class: 'muted page-info'});
  const gen = generation;
  const table = {reload: () => go(token, 0)};
  table.node = el('div', {class: 'job-table'},
    el('table', {class: 'jobs'},
      el('thead', {}, el('tr', {}, ...headings.map(h => el('th', {text: h})))), tbody),
    el('div', {class: 'pager'}, back, info, next));

  // Loads the page at `pageToken`, `step` pages from the current one.
  function go(pageToken, step) {
    back.disabled = next.disabled = true;
    const params = new URLSearchParams({page_size: String(PAGE_SIZE)});
    for (const [key, value] of Object.entries(query)) if (value) params.set(key, value);
    if (pageToken) params.set('page_token', pageToken);
    return api('GET', topicPath(topic) + '/jobs?' + params).then(page => {
      if (gen !== generation) return;
      if (step > 0) stack.push(token);
      if (step < 0) stack.pop();
      token = pageToken || '';
      nextToken = page.nextPageToken || '';
      const jobs = page.jobs || [];
      tbody.replaceChildren(...jobs.map(job => jobRow(job, actions, table)));
      if (jobs.length === 0) {
        tbody.append(el('tr', {}, el('td', {colspan: headings.length, class: 'muted',
          text: 'No jobs.'})));
      }
      info.textContent = `Page ${stack.length + 1} \u00b7 ${jobs.length} jobs`;
    }).catch(e => { if (gen === generation) showError(e); }).finally(() => {
      back.disabled = stack.length === 0;
      next.disabled = !nextToken;
    });
  }
  go('', 0);
  return table;
}

function jobRow(job, actions, table) {
  const row = el('tr', {'data-id': job.id},
    el('td', {class: 'id'}, link(hashJob(job.topic, job.id), job.id)),
    el('td', {text: stateName(job.state), class: 'state'}),
    el('td', {text: String(job.attempts), class: 'num'}),
    el('td', {text: timeText(job.fireAt)}),
    el('td', {text: job.lastError || '', class: 'error-text'}));
  if (actions) row.append(el('td', {class: 'actions'}, ...actions(job, table)));
  return row;
}

// Runs a state-changing call from `btn`: disabled while it runs; the
// message `call` resolves to, or the error, goes to the status line.
async function act(btn, call) {
  btn.disabled = true;
  try { showStatus(await call(), 'ok'); } catch (e) { showError(e); }
  btn.disabled = false;
}

// A button running `call` through act(), after confirm(question) if given.
function actionButton(text, attrs, call, question) {
  return button(text, event => {
    if (!question || confirm(question)) act(event.currentTarget, call);
  }, attrs);
}

function outcomeName(reply) {
  return String(reply.outcome || '').replace(/^CANCEL_OUTCOME_/, '');
}

// ------------------------------------------------------------------- jobs

function renderJobs(view, topic, params) {
  document.title = `${topic} jobs \u00b7 delayd`;
  const filters = {};
  for (const key of ['state', 'prefix', 'after', 'before']) filters[key] = params.get(key) || '';
  const state = el('select', {name: 'state', id: 'filter-state'},
    el('option', {value: '', text: 'any state'}),
    ...STATES.map(s => el('option', {value: s, text: s, selected: s === filters.state})));
  const prefix = el('input', {name: 'prefix', id: 'filter-prefix', value: filters.prefix,
    placeholder: 'id prefix'});
  const after = el('input', {type: 'datetime-local', id: 'filter-after', value: filters.after});
  const before = el('input', {type: 'datetime-local', id: 'filter-before', value: filters.before});
  const form = el('form', {class: 'filters', id: 'job-filters'},
    el('label', {}, 'State ', state), el('label', {}, 'Id prefix ', prefix),
    el('label', {}, 'Due after ', after), el('label', {}, 'Due before ', before),
    el('button', {type: 'submit', text: 'Apply'}), link(hashJobs(topic), 'Clear'));
  form.addEventListener('submit', event => {
    event.preventDefault();
    const hash = hashJobs(topic, {state: state.value, prefix: prefix.value,
      after: after.value, before: before.value});
    if (location.hash === hash) route(); else location.hash = hash;
  });
  view.append(el('h1', {}, 'Jobs of ', el('span', {class: 'topic', text: topic})), form);
  const query = {include_payload: 'false', state: filters.state, prefix: filters.prefix,
    due_after: rfc3339(filters.after), due_before: rfc3339(filters.before)};
  view.append(jobTable(topic, query).node, dueSoonBox(topic));
}

// A datetime-local value (local time) as RFC 3339 UTC; '' when empty or
// not a date (only a hand-edited hash holds one; it is then no bound).
function rfc3339(local) {
  const ms = Date.parse(local);
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString();
}

// ------------------------------------------------------------- job detail

function renderDetail(view, topic, id) {
  document.title = `${id} \u00b7 delayd`;
  view.append(el('h1', {text: 'Job'}));
  guarded(async current => {
    const job = await api('GET', jobPath(topic, id));
    if (!current()) return;
    const fields = el('div', {id: 'job-fields-box'}, jobFields(job));
    view.append(fields, payloadBox(job.payload), jobActions(job, fields));
  });
}

function jobFields(job) {
  const retry = job.retry || {};
  const rows = [
    ['Topic', link(hashJobs(job.topic), job.topic), 'job-topic'],
    ['ID', job.id, 'job-id'],
    ['State', stateName(job.state), 'job-state'],
    ['Attempts', `${job.attempts} of ${retry.maxAttempts}`, 'job-attempts'],
    ['Fire at', timeText(job.fireAt), 'job-fire-at'],
    ['Created', timeText(job.createdAt), 'job-created'],
    ['Updated', timeText(job.updatedAt), 'job-updated'],
    ['Last error', job.lastError || '\u2014', 'job-last-error'],
    ['Labels', labelList(job.labels), 'job-labels'],
    ['Retry', `lease ${retry.lease}, backoff ${retry.initialBackoff} \u00d7` +
      `${retry.backoffMultiplier} up to ${retry.maxBackoff}`, 'job-retry'],
  ];
  if (job.occurrenceOf) {
    rows.push(['Occurrence of', el('span', {},
      link(hashJob(job.topic, job.occurrenceOf.id), job.occurrenceOf.id),
      ' at ' + timeText(job.occurrenceOf.nominalTime)), 'job-occurrence-of']);
  }
  if (job.recurring) rows.push(['Recurring', recurringInfo(job.recurring), 'job-recurring']);
  return el('dl', {id: 'job-fields', class: 'fields'}, ...rows.flatMap(([name, value, id]) =>
    [el('dt', {text: name}), el('dd', {id}, value)]));
}

function labelList(labels) {
  const entries = Object.entries(labels || {});
  if (entries.length === 0) return '\u2014';
  return el('ul', {class: 'labels'}, ...entries.map(([key, value]) =>
    el('li', {'data-key': key}, el('span', {class: 'key', text: key}), ' = ',
      el('span', {class: 'value', text: value}))));
}

function recurringInfo(r) {
  return el('div', {},
    el('div', {text: `next ${timeText(r.nextOccurrence)}, last ${timeText(r.lastOccurrence)}`}),
    el('div', {text: `${r.occurrencesFired} fired, ${r.occurrencesSkipped} skipped`}),
    el('code', {class: 'recurrence', text: JSON.stringify(r.recurrence)}));
}

// The payload as UTF-8 text when it is valid UTF-8, with a toggle to hex.
function payloadBox(b64) {
  const bytes = base64Bytes(b64);
  const text = utf8OrNull(bytes);
  const pre = el('pre', {id: 'payload', class: 'payload'});
  const note = el('span', {class: 'muted', id: 'payload-note'});
  let hex = text === null;
  const toggle = button('', () => { hex = !hex; show(); }, {id: 'payload-toggle'});
  function show() {
    pre.textContent = hex ? hexDump(bytes) : text;
    toggle.textContent = hex ? 'Show as text' : 'Show as hex';
    toggle.disabled = text === null;
    pre.dataset.mode = hex ? 'hex' : 'text';
    note.textContent = `${bytes.length} bytes` + (text === null ? ', not UTF-8' : '');
  }
  show();
  return el('section', {class: 'payload-box'},
    el('h2', {}, 'Payload ', note), toggle, pre);
}

function jobActions(job, fields) {
  const seconds = el('input', {type: 'number', id: 'reschedule-seconds', min: '0',
    value: '60', class: 'seconds'});
  const update = reply => { if (reply.job) fields.replaceChildren(jobFields(reply.job)); };
  const cancel = actionButton('Cancel job', {id: 'cancel', class: 'danger'}, async () => {
    const reply = await cancelJob(job.topic, job.id);
    update(reply);
    return `Cancel ${job.id}: ${outcomeName(reply)}`;
  }, `Cancel job ${job.id}?`);
  const reschedule = actionButton('Reschedule', {id: 'reschedule'}, async () => {
    const n = Number(seconds.value);
    if (!Number.isInteger(n) || n < 0) throw new Error('seconds: a whole number >= 0');
    const reply = await api('POST', jobPath(job.topic, job.id) + ':reschedule', {delay: `${n}s`});
    update(reply);
    return `Rescheduled ${job.id}: fires at ${timeText(reply.job.fireAt)}`;
  });
  const box = el('section', {class: 'actions-box'}, el('h2', {text: 'Actions'}), cancel,
    el('label', {}, ' Fire in ', seconds, ' s '), reschedule);
  if (stateName(job.state) === 'DEAD') {
    box.append(' ', actionButton('Redrive', {id: 'redrive'}, async () => {
      const reply = await redrive(job.topic, job.id);
      update({job: await api('GET', jobPath(job.topic, job.id))});
      return `Redrive ${job.id}: ${reply.redriven} redriven`;
    }));
  }
  return box;
}

// ----------------------------------------------------------- dead letters

function renderDead(view, onlyTopic) {
  document.title = 'Dead letters \u00b7 delayd';
  view.append(el('h1', {text: 'Dead letters'}));
  if (onlyTopic) view.append(el('p', {}, link('#/dead', 'All topics')));
  guarded(async current => {
    const query = onlyTopic ? '?topic=' + enc(onlyTopic) : '';
    const stats = await api('GET', '/stats' + query);
    if (!current()) return;
    const topics = (stats.topics || []).filter(t => String(t.dead) !== '0');
    if (topics.length === 0) {
      view.append(el('p', {id: 'no-dead', class: 'muted', text: 'No dead letters.'}));
    }
    for (const t of topics) view.append(deadSection(t.topic, t.dead));
  });
}

function deadSection(topic, dead) {
  const count = el('span', {class: 'muted count', text: `${dead} dead`});
  const table = jobTable(topic, {state: 'DEAD'}, deadActions);
  const refresh = table.refresh = () => {
    table.reload();
    api('GET', '/stats?topic=' + enc(topic)).then(s => {
      count.textContent = `${(s.topics[0] || {}).dead || 0} dead`;
    }).catch(showError);
  };
  const all = actionButton('Redrive all', {class: 'redrive-all'}, async () => {
    const reply = await redrive(topic);
    refresh();
    return `Redrive all of ${topic}: ${reply.redriven} redriven`;
  }, `Redrive every dead job of ${topic}?`);
  return el('section', {class: 'dead-topic', 'data-topic': topic},
    el('h2', {}, link(hashJobs(topic, {state: 'DEAD'}), topic), ' ', count, ' ', all),
    table.node);
}

function deadActions(job, table) {
  return [
    link(hashJob(job.topic, job.id), 'Inspect', {class: 'button', 'data-action': 'inspect'}),
    actionButton('Redrive', {'data-action': 'redrive'}, async () => {
      const reply = await redrive(job.topic, job.id);
      table.refresh();
      return `Redrive ${job.id}: ${reply.redriven} redriven`;
    }),
    actionButton('Cancel', {'data-action': 'cancel', class: 'danger'}, async () => {
      const reply = await cancelJob(job.topic, job.id);
      table.refresh();
      return `Cancel ${job.id}: ${outcomeName(reply)}`;
    }, `Cancel job ${job.id}?`),
  ];
}

window.addEventListener('hashchange', route);
route();
