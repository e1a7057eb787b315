// The cluster view: the tree `capstan describe` shows, every condition with
// its reason and message, the workload's Nodes beside their Machines, the
// events as a timeline and the actions the server offers.

import { el, replace, badge, statusClass, conditionClass, isNormal, ratio, ratioClass, age } from './dom.js';

// render fills section with a cluster's detail payload. act(action) is
// called when the user asks for an action; it confirms and sends it.
export function renderCluster(section, detail, act) {
  const s = detail.summary || {};
  const actions = detail.actions || {};
  const nodesByMachine = new Map();
  for (const n of detail.nodes || []) if (n.machine) nodesByMachine.set(n.machine, n);

  // Scale and restart buttons sit on the tree row of their object; what the
  // tree does not show stays in the header so it is never lost.
  const scale = [...(actions.scale || [])];
  const restart = [...(actions.rolloutRestart || [])];
  const rowActions = (node) => {
    const buttons = [];
    const takes = (a) => a.name === node.name &&
      (a.kind === node.kind || (a.kind === 'ControlPlane' && node.role === 'ControlPlane'));
    const si = scale.findIndex(takes);
    if (si >= 0) buttons.push(scaleButton(scale.splice(si, 1)[0], act));
    const ri = restart.findIndex(takes);
    if (ri >= 0) buttons.push(restartButton(restart.splice(ri, 1)[0], act));
    return buttons;
  };

  const treeRows = [];
  if (detail.tree) walk(detail.tree, 0, treeRows, nodesByMachine, rowActions);

  const headerActions = [
    ...scale.map((a) => scaleButton(a, act)),
    ...restart.map((a) => restartButton(a, act)),
  ];
  if (actions.pause) {
    headerActions.push(s.paused
      ? el('button', { type: 'button', 'data-action': 'resume', onclick: () => act({ action: 'resume' }) }, 'Resume')
      : el('button', { type: 'button', 'data-action': 'pause', onclick: () => act({ action: 'pause' }) }, 'Pause'));
  }
  headerActions.push(el('button', { type: 'button', 'data-action': 'kubeconfig', onclick: () => act({ action: 'kubeconfig' }) }, 'Kubeconfig'));

  // The view is rebuilt on every change; the folds the user opened stay open.
  const opened = new Set([...section.querySelectorAll('.tree-row:has(> details.folded[open])')].map(rowKey));

  const problems = s.problems || [];
  replace(section,
    el('div', { class: 'cluster-head' },
      el('div', { class: 'title' },
        el('h1', null, el('span', { class: 'muted' }, `${s.namespace}/`), s.name),
        badge(s.available, s.available && s.available.status === 'True' ? 'Available' : null),
        s.paused ? el('span', { class: 'flag paused' }, 'paused') : null,
        s.deleting ? el('span', { class: 'flag deleting' }, 'deleting') : null),
      el('div', { class: 'actions' }, headerActions)),
    el('dl', { class: 'facts' },
      fact('Phase', s.phase), fact('Version', s.version), fact('Class', s.class),
      fact('Control plane', ratio(s.controlPlane), ratioClass(s.controlPlane), 'controlPlane'),
      fact('Workers', ratio(s.workers), ratioClass(s.workers), 'workers'),
      fact('Age', age(s.createdAt), null, null, s.createdAt)),
    s.available && s.available.status !== 'True' && s.available.message
      ? el('p', { class: `banner ${statusClass(s.available.status)}` }, s.available.message) : null,
    problems.length ? el('ul', { class: 'problem-list', 'data-testid': 'problems' }, problems.map((p) => el('li', null, p))) : null,
    // What could not be read (RBAC, most often): the tree shows such
    // objects as missing, and this says why.
    (detail.warnings || []).length ? el('div', { class: 'warnings', 'data-testid': 'warnings' },
      el('strong', null, 'Not everything could be read:'),
      el('ul', null, detail.warnings.map((w) => el('li', null, w)))) : null,
    el('h2', null, 'Objects'),
    el('div', { class: 'tree', 'data-testid': 'tree' }, treeRows),
    el('h2', null, 'Nodes'),
    detail.nodesError ? el('p', { class: 'list-error' }, detail.nodesError) : null,
    nodesTable(detail.nodes || []),
    el('h2', null, 'Events'),
    eventsTable(detail.events || []),
  );
  for (const row of section.querySelectorAll('.tree-row')) {
    if (opened.has(rowKey(row))) row.querySelector(':scope > details.folded')?.setAttribute('open', '');
  }
}

const rowKey = (row) => `${row.dataset.role}/${row.dataset.kind || ''}/${row.dataset.name || row.dataset.machines || ''}`;

function fact(label, value, cls, field, title) {
  return el('div', { class: 'fact' },
    el('dt', null, label),
    el('dd', { class: cls || null, 'data-field': field || null, title: title || null }, value || '–'));
}

function scaleButton(a, act) {
  return el('button', {
    type: 'button', 'data-action': 'scale', 'data-target': `${a.kind}/${a.name}`,
    onclick: () => act({ action: 'scale', kind: a.kind, name: a.name, replicas: a.replicas }),
  }, 'Scale…');
}

function restartButton(a, act) {
  return el('button', {
    type: 'button', 'data-action': 'rollout-restart', 'data-target': `${a.kind}/${a.name}`,
    onclick: () => act({ action: 'rollout-restart', kind: a.kind, name: a.name }),
  }, 'Restart…');
}

// walk flattens the tree into rows, each indented by its depth, so a row's
// conditions belong to it alone and not to the rows below.
function walk(node, depth, rows, nodesByMachine, rowActions) {
  rows.push(treeRow(node, depth, nodesByMachine, rowActions));
  for (const child of node.children || []) walk(child, depth + 1, rows, nodesByMachine, rowActions);
}

const roleLabels = {
  ClusterInfrastructure: 'infrastructure',
  ControlPlane: 'control plane',
  MachineInfrastructure: 'infrastructure',
  BootstrapConfig: 'bootstrap',
  MachinePoolInfrastructure: 'infrastructure',
  Topology: 'topology',
};

// nodeReadiness reads a Node's Ready condition status ("True", "False",
// "Unknown" or empty when the Node reports none).
function nodeReadiness(n) {
  switch (n.ready) {
    case 'True': return { text: 'Ready', cls: 'ok' };
    case 'False': return { text: 'NotReady', cls: 'bad' };
    default: return { text: 'Ready unknown', cls: 'warn' };
  }
}

function treeRow(node, depth, nodesByMachine, rowActions) {
  const grouped = node.role === 'MachineGroup';
  const label = [];
  if (node.role === 'Workers' || node.role === 'Other') {
    label.push(el('span', { class: 'group' }, node.role));
  } else if (grouped) {
    label.push(el('span', { class: 'kind' }, 'Machine'), ` ×${(node.machines || []).length}`);
  } else {
    if (roleLabels[node.role]) label.push(el('span', { class: 'role' }, roleLabels[node.role]));
    label.push(el('span', { class: 'kind' }, node.kind), el('span', { class: 'sep' }, '/'), el('span', { class: 'name' }, node.name));
    if (node.version) label.push(el('span', { class: 'mono muted' }, ` ${node.version}`));
  }
  const extra = [];
  if (node.phase) extra.push(el('span', { class: `phase phase-${node.phase.toLowerCase()}` }, node.phase));
  if (node.replicas) extra.push(replicas(node.replicas));
  if (node.role === 'Machine') {
    const n = nodesByMachine.get(node.name);
    if (n) {
      const r = nodeReadiness(n);
      extra.push(el('span', { class: `node-ref ${r.cls}`, title: n.providerID || null },
        'Node ', el('span', { class: 'mono' }, n.name), ` ${r.text}`));
    }
  }
  // The summary and whatever is unusual or explains itself are shown; the
  // conditions in their usual state fold away, still one click from view.
  const conds = [];
  const folded = [];
  if (node.status) conds.push(condition(node.status, true));
  for (const c of node.conditions || []) {
    if (node.status && c.type === node.status.type) continue;
    (isNormal(c) && !c.message ? folded : conds).push(condition(c, false));
  }
  const row = el('div', {
    class: 'tree-row',
    'data-role': node.role,
    'data-kind': grouped ? 'Machine' : node.kind || null,
    'data-name': grouped ? null : node.name || null,
    'data-machines': grouped ? (node.machines || []).join(' ') : null,
  },
  el('div', { class: 'tree-head' },
    el('span', { class: `dot ${statusClass(node.status && node.status.status)}` }),
    el('span', { class: 'label' }, label),
    extra,
    el('span', { class: 'spacer' }),
    rowActions(node)),
  grouped ? el('div', { class: 'members mono muted' }, (node.machines || []).join(', ')) : null,
  conds.length ? el('div', { class: 'conds' }, conds) : null,
  folded.length ? el('details', { class: 'folded' },
    el('summary', null, `${folded.length} more condition${folded.length === 1 ? '' : 's'} as usual`),
    el('div', { class: 'conds' }, folded)) : null);
  // Through the CSSOM, which a strict Content-Security-Policy allows.
  row.style.setProperty('--depth', String(depth));
  return row;
}

function replicas(r) {
  const show = (n) => (n === null || n === undefined ? '–' : String(n));
  const title = `desired ${show(r.desired)}, current ${show(r.current)}, ready ${show(r.ready)}, available ${show(r.available)}, up to date ${show(r.upToDate)}`;
  const cls = r.desired !== undefined && r.ready === r.desired && (r.upToDate === undefined || r.upToDate === r.desired) ? 'ok' : 'warn';
  return el('span', { class: `replicas ${cls}`, title },
    `${show(r.ready)}/${show(r.desired)} ready`,
    r.upToDate !== undefined && r.upToDate !== r.desired ? `, ${show(r.upToDate)} up to date` : '');
}

function condition(c, summary) {
  return el('div', { class: `cond ${summary ? 'summary' : ''}`, 'data-condition': c.type, 'data-status': c.status },
    el('span', { class: 'cond-type' }, c.type),
    el('span', { class: `badge ${conditionClass(c)}`, 'data-field': 'status' }, c.status),
    el('span', { class: 'cond-reason', 'data-field': 'reason' }, c.reason || ''),
    el('span', { class: 'cond-message', 'data-field': 'message' }, c.message || ''),
    el('span', { class: 'cond-age muted', title: c.lastTransitionTime || null }, age(c.lastTransitionTime)));
}

function nodesTable(nodes) {
  if (!nodes.length) return el('p', { class: 'empty', 'data-testid': 'nodes' }, 'No Nodes.');
  return el('table', { class: 'grid', 'data-testid': 'nodes' },
    el('thead', null, el('tr', null, ['Node', 'Machine', 'Ready', 'Version', 'Roles', 'Provider ID'].map((h) => el('th', null, h)))),
    el('tbody', null, nodes.map((n) => el('tr', { 'data-node': n.name },
      el('td', { class: 'mono' }, n.name),
      el('td', { class: 'mono' }, n.machine || '–'),
      el('td', null, el('span', { class: `badge ${nodeReadiness(n).cls}` }, nodeReadiness(n).text)),
      el('td', { class: 'mono' }, n.version || ''),
      el('td', null, (n.roles || []).join(', ')),
      el('td', { class: 'mono muted' }, n.providerID || '')))));
}

function eventsTable(events) {
  if (!events.length) return el('p', { class: 'empty', 'data-testid': 'events' }, 'No events.');
  const sorted = [...events].sort((a, b) => (Date.parse(b.time) || 0) - (Date.parse(a.time) || 0));
  return el('table', { class: 'grid timeline', 'data-testid': 'events' },
    el('thead', null, el('tr', null, ['When', 'Type', 'Reason', 'Object', 'Message'].map((h) => el('th', null, h)))),
    el('tbody', null, sorted.map((e) => el('tr', { class: e.type === 'Warning' ? 'warning' : null, 'data-reason': e.reason },
      el('td', { class: 'muted', title: e.time || null }, age(e.time), e.count > 1 ? ` (×${e.count})` : ''),
      el('td', null, el('span', { class: `badge ${e.type === 'Warning' ? 'bad' : 'none'}` }, e.type)),
      el('td', null, e.reason),
      el('td', { class: 'mono' }, `${e.kind}/${e.name}`),
      el('td', { class: 'message' }, e.message)))));
}
