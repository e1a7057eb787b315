// Small helpers to build the DOM. Everything that came from the API goes in
// through textContent or attributes, never through innerHTML, so a Cluster
// named "<img onerror=...>" is only ever text.

// el builds an element: attrs sets attributes ("class", "data-*", "title",
// ...; a null or undefined value is skipped), children are nodes or strings.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'onclick') node.addEventListener('click', value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

// replace empties node and fills it with children.
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// statusClass maps a condition status to the class that colours it.
export function statusClass(status) {
  switch (status) {
    case 'True': return 'ok';
    case 'False': return 'bad';
    case 'Unknown': return 'unknown';
    default: return 'none';
  }
}

// Conditions whose normal state is False: True means something is going on
// (a rollout, a pause), which is worth a look but is not a failure.
const negativePolarity = new Set(['Paused', 'Deleting', 'ScalingUp', 'ScalingDown', 'RollingOut', 'Remediating', 'Updating']);

// conditionClass colours a condition by what its status means for its
// type, so that "Paused False" is not shown as a failure.
export function conditionClass(c) {
  if (!c || !c.status) return 'none';
  if (negativePolarity.has(c.type)) {
    if (c.status === 'False') return 'ok';
    return c.status === 'True' ? 'warn' : 'unknown';
  }
  return statusClass(c.status);
}

// isNormal says whether a condition is in its usual, nothing-to-see state.
export function isNormal(c) {
  return conditionClass(c) === 'ok';
}

// badge is a coloured pill for a condition: its status, or its reason when
// it has one, with the message as tooltip.
export function badge(cond, label) {
  if (!cond || !cond.status) return el('span', { class: 'badge none' }, label || '–');
  return el('span', { class: `badge ${statusClass(cond.status)}`, title: cond.message || null },
    label || cond.reason || cond.status);
}

// count shows "ready/desired", with "?" for a count the server left null.
export function ratio(counts) {
  if (!counts) return '–';
  const show = (n) => (n === null || n === undefined ? '?' : String(n));
  if (counts.desired === null || counts.desired === undefined) {
    if (counts.ready === null || counts.ready === undefined) return '–';
  }
  return `${show(counts.ready)}/${show(counts.desired)}`;
}

// ratioClass colours a ready/desired pair: green when all desired are ready
// and up to date, amber while some are missing or out of date.
export function ratioClass(counts) {
  if (!counts || counts.desired === null || counts.desired === undefined) return 'none';
  if (counts.ready === counts.desired &&
      (counts.upToDate === null || counts.upToDate === undefined || counts.upToDate === counts.desired)) return 'ok';
  return 'warn';
}

// age is how long ago an RFC 3339 time was, the way kubectl shows it.
export function age(time, now = Date.now()) {
  if (!time) return '';
  const t = Date.parse(time);
  if (Number.isNaN(t)) return '';
  let s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}
