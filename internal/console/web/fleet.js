// The fleet view: one table row per Cluster, built once and updated in
// place when the stream reports a change, so a thousand clusters cost a
// thousand rows and an event costs one.

import { el, replace, badge, ratio, ratioClass, age } from './dom.js';

export const key = (c) => `${c.namespace}/${c.name}`;

// parseFilter reads the filter box: words that must all match. "ns:X" keeps
// namespace X, "label:K=V" (or "label:K") a label, "is:problem" clusters
// with problems or not Available, "is:paused" paused ones; any other word
// is looked for in "namespace/name".
export function parseFilter(text) {
  const tests = [];
  for (const word of text.trim().toLowerCase().split(/\s+/).filter(Boolean)) {
    const [prefix, ...rest] = word.split(':');
    const value = rest.join(':');
    if (rest.length && prefix === 'ns') {
      tests.push((c) => c.namespace.toLowerCase() === value);
    } else if (rest.length && prefix === 'label') {
      const [k, ...v] = value.split('=');
      const want = v.length ? v.join('=') : null;
      tests.push((c) => Object.entries(c.labels || {}).some(([lk, lv]) =>
        lk.toLowerCase() === k && (want === null || String(lv).toLowerCase() === want)));
    } else if (rest.length && prefix === 'is') {
      if (value === 'problem') tests.push(hasProblem);
      else if (value === 'paused') tests.push((c) => !!c.paused);
      else if (value === 'deleting') tests.push((c) => !!c.deleting);
      else tests.push(() => false);
    } else {
      tests.push((c) => key(c).toLowerCase().includes(word));
    }
  }
  return (c) => tests.every((t) => t(c));
}

export function hasProblem(c) {
  return (c.problems && c.problems.length > 0) || (c.available && c.available.status === 'False');
}

const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

export class Fleet {
  constructor(section) {
    this.section = section;
    this.tbody = section.querySelector('[data-testid=fleet] tbody');
    this.filterInput = section.querySelector('[data-testid=filter]');
    this.countEl = section.querySelector('[data-testid=count]');
    this.tallyEl = section.querySelector('[data-testid=tally]');
    this.tallyText = '';
    this.errorEl = section.querySelector('#fleet-error');
    this.rows = new Map(); // key → { tr, json, summary, shown }
    this.keys = []; // sorted, the order of the rows in the table
    this.match = () => true;
    this.pending = new Map(); // key → summary, or null for a deleted one
    this.flushTimer = 0;
    this.filterInput.addEventListener('input', () => this.setFilter(this.filterInput.value));
    // Ages move on even when nothing else does.
    setInterval(() => this.refreshAges(), 30000);
  }

  setFilter(text) {
    if (this.onFilter) this.onFilter(text);
    this.match = parseFilter(text);
    for (const row of this.rows.values()) this.applyFilter(row);
    this.updateCount();
  }

  setError(message) {
    this.errorEl.hidden = !message;
    this.errorEl.textContent = message || '';
  }

  // replaceAll shows the full list the server sent: rows of clusters no
  // longer there go, the others are updated or added.
  replaceAll(clusters) {
    const seen = new Set(clusters.map(key));
    for (const k of [...this.rows.keys()]) if (!seen.has(k)) this.pending.set(k, null);
    for (const c of clusters) this.pending.set(key(c), c);
    this.flush();
  }

  // upsert and remove queue a change; changes that arrive together (the full
  // list at connect, a burst during a rollout) are applied in one go.
  upsert(c) { this.queue(key(c), c); }
  remove(ref) { this.queue(key(ref), null); }

  queue(k, value) {
    this.pending.set(k, value);
    if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), 15);
  }

  flush() {
    clearTimeout(this.flushTimer);
    this.flushTimer = 0;
    if (this.pending.size === 0) return;
    const added = [];
    for (const [k, c] of this.pending) {
      const row = this.rows.get(k);
      if (c === null) {
        if (row) {
          row.tr.remove();
          this.rows.delete(k);
          this.keys.splice(this.indexOf(k), 1);
        }
      } else if (row) {
        const json = JSON.stringify(c);
        if (json !== row.json) {
          row.json = json;
          row.summary = c;
          fillRow(row.tr, c);
          this.applyFilter(row);
        }
      } else {
        added.push(c);
      }
    }
    this.pending.clear();
    if (added.length) this.insert(added);
    this.updateCount();
  }

  // insert adds new rows in namespace/name order. Many at once (the first
  // list) are appended in one fragment; a few are put in their places.
  insert(clusters) {
    clusters.sort((a, b) => compare(key(a), key(b)));
    const make = (c) => {
      const tr = el('tr', { 'data-cluster': key(c) });
      const row = { tr, json: JSON.stringify(c), summary: c, shown: true };
      fillRow(tr, c);
      this.applyFilter(row);
      this.rows.set(key(c), row);
      return row;
    };
    if (this.keys.length === 0 || clusters.length > 50) {
      const fragment = document.createDocumentFragment();
      for (const c of clusters) {
        make(c);
      }
      this.keys = [...this.rows.keys()].sort(compare);
      for (const k of this.keys) fragment.appendChild(this.rows.get(k).tr);
      this.tbody.appendChild(fragment);
      return;
    }
    for (const c of clusters) {
      const row = make(c);
      const at = this.insertionPoint(key(c));
      const before = at < this.keys.length ? this.rows.get(this.keys[at]).tr : null;
      this.keys.splice(at, 0, key(c));
      this.tbody.insertBefore(row.tr, before);
    }
  }

  insertionPoint(k) {
    let lo = 0;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.keys[mid] < k) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  indexOf(k) {
    const at = this.insertionPoint(k);
    return this.keys[at] === k ? at : -1;
  }

  applyFilter(row) {
    row.shown = this.match(row.summary);
    if (row.tr.hidden === row.shown) row.tr.hidden = !row.shown;
  }

  // updateCount says how many rows show, and how many clusters need a
  // look: each figure is a link that filters the table down to them.
  updateCount() {
    let shown = 0;
    const tally = { problem: 0, paused: 0, deleting: 0 };
    for (const row of this.rows.values()) {
      if (row.shown) shown++;
      if (hasProblem(row.summary)) tally.problem++;
      if (row.summary.paused) tally.paused++;
      if (row.summary.deleting) tally.deleting++;
    }
    const total = this.rows.size;
    this.countEl.textContent = `${shown} of ${total} cluster${total === 1 ? '' : 's'}`;
    const text = `${tally.problem}/${tally.paused}/${tally.deleting}`;
    if (this.tallyText === text) return;
    this.tallyText = text;
    const link = (n, word, filter, cls) => (n ? el('button', {
      type: 'button', class: `link ${cls}`, 'data-filter': filter,
      onclick: () => { this.filterInput.value = filter; this.setFilter(filter); },
    }, `${n} ${word}`) : null);
    replace(this.tallyEl,
      link(tally.problem, tally.problem === 1 ? 'with a problem' : 'with problems', 'is:problem', 'bad'),
      link(tally.paused, 'paused', 'is:paused', 'warn'),
      link(tally.deleting, 'deleting', 'is:deleting', 'bad'));
  }

  refreshAges() {
    const now = Date.now();
    for (const row of this.rows.values()) {
      const cell = row.tr.querySelector('[data-field=age]');
      if (cell) cell.textContent = age(row.summary.createdAt, now);
    }
  }

  summary(k) {
    const row = this.rows.get(k);
    return row ? row.summary : null;
  }
}

// fillRow writes a cluster's cells; the row keeps its identity so an update
// touches one row only.
function fillRow(tr, c) {
  const href = `#/clusters/${encodeURIComponent(c.namespace)}/${encodeURIComponent(c.name)}`;
  const flags = [];
  if (c.paused) flags.push(el('span', { class: 'flag paused' }, 'paused'));
  if (c.deleting) flags.push(el('span', { class: 'flag deleting' }, 'deleting'));
  const problems = c.problems || [];
  tr.className = problems.length ? 'has-problem' : '';
  replace(tr,
    el('td', { 'data-field': 'namespace', class: 'muted' }, c.namespace),
    el('td', { 'data-field': 'name', class: 'name' }, el('a', { href }, c.name), flags),
    el('td', { 'data-field': 'available' }, badge(c.available, c.available && c.available.status === 'True' ? 'Available' : null)),
    countCell('controlPlane', c.controlPlane),
    countCell('workers', c.workers),
    el('td', { 'data-field': 'version', class: 'mono' }, c.version || ''),
    el('td', { 'data-field': 'phase' }, el('span', { class: `phase phase-${(c.phase || 'none').toLowerCase()}` }, c.phase || '')),
    el('td', { 'data-field': 'class', class: 'muted' }, c.class || ''),
    el('td', { 'data-field': 'problems', class: 'problems', title: problems.join('\n') || null },
      problems.length ? [problems[0], problems.length > 1 ? el('span', { class: 'more' }, ` +${problems.length - 1}`) : null] : ''),
    el('td', { 'data-field': 'age', class: 'muted', title: c.createdAt || null }, age(c.createdAt)),
  );
}

function countCell(field, counts) {
  const upToDate = counts && counts.upToDate !== null && counts.upToDate !== undefined && counts.upToDate !== counts.desired
    ? `${counts.upToDate} up to date` : null;
  return el('td', { 'data-field': field, class: `count ${ratioClass(counts)}`, title: upToDate }, ratio(counts));
}
