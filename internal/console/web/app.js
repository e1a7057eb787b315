// The console's entry point: routes by the location hash (#/ the fleet,
// #/clusters/NS/NAME a cluster), follows the server's event stream and runs
// the confirmed actions.

import { session, signInFromURL, getJSON, post, postJSON, clusterPath } from './api.js';
import { Fleet, key } from './fleet.js';
import { renderCluster } from './cluster.js';
import { el, replace } from './dom.js';

const fleetSection = document.getElementById('fleet-view');
const clusterSection = document.getElementById('cluster-view');
const liveEl = document.querySelector('[data-testid=live]');
const errorEl = document.querySelector('[data-testid=error]');
const crumbsEl = document.getElementById('crumbs');
const fleet = new Fleet(fleetSection);
// The filter lives in the address (#/?q=…), so a filtered fleet can be
// bookmarked, shared, and is still there after a visit to a cluster.
let lastFilter = '';
fleet.onFilter = (text) => {
  if (route.view !== 'fleet') return;
  route.filter = lastFilter = text;
  history.replaceState(null, '', text ? `#/?q=${encodeURIComponent(text)}` : '#/');
};

let route = { view: 'fleet' };
let detail = null; // the detail payload of the cluster on screen
let stream = null;
let streamFor = null; // the cluster the stream sends details of, or ''
let generation = 0; // bumps on every navigation; late replies of older ones are dropped
// fleetLoaded settles once the first list is on screen. The fleet's stream
// opens after it: the stream starts by sending every cluster again, and a
// thousand events racing the first list would only slow it down.
let fleetLoaded = null;

// showError puts the server's message where it cannot be missed; null
// clears it.
function showError(message) {
  errorEl.hidden = !message;
  errorEl.querySelector('.error-text').textContent = message || '';
}
errorEl.querySelector('.error-close').addEventListener('click', () => showError(null));

function parseRoute() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const m = hash.match(/^\/clusters\/([^/]+)\/([^/]+)\/?$/);
  if (m) return { view: 'cluster', namespace: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) };
  const q = hash.match(/^\/\?q=(.*)$/);
  return { view: 'fleet', filter: q ? decodeURIComponent(q[1]) : '' };
}

const routeKey = () => (route.view === 'cluster' ? `${route.namespace}/${route.name}` : '');

async function showRoute() {
  route = parseRoute();
  const gen = ++generation;
  fleetSection.hidden = route.view !== 'fleet';
  clusterSection.hidden = route.view !== 'cluster';
  if (route.view === 'fleet') {
    detail = null;
    const input = fleetSection.querySelector('[data-testid=filter]');
    if (input.value !== route.filter) {
      input.value = route.filter;
      fleet.setFilter(route.filter);
    }
    replace(crumbsEl, el('span', null, 'Clusters'));
    document.title = 'Clusters · Capstan';
    await fleetLoaded;
    if (gen === generation) connect('');
    return;
  }
  const back = lastFilter ? `#/?q=${encodeURIComponent(lastFilter)}` : '#/';
  replace(crumbsEl, el('a', { href: back }, 'Clusters'), ' / ', el('span', null, route.namespace), ' / ',
    el('span', null, route.name));
  document.title = `${route.name} · Capstan`;
  if (!detail || key(detail.summary || {}) !== routeKey()) {
    detail = null;
    replace(clusterSection, el('p', { class: 'empty' }, 'Loading…'));
  }
  // A new stream starts with the cluster's detail; one already following
  // this cluster sends only changes, so read the detail once.
  if (connect(routeKey())) return;
  try {
    const d = await getJSON(clusterPath(route.namespace, route.name));
    if (gen === generation) showDetail(d);
  } catch (err) {
    if (gen === generation) showDetailError(err.message);
  }
}

// showDetailError says why the cluster cannot be shown: in place of the
// view when there is nothing to show yet, above it otherwise.
function showDetailError(message) {
  if (detail) showError(message);
  else replace(clusterSection, el('p', { class: 'list-error', 'data-testid': 'detail-error' }, message));
}

function showDetail(d) {
  detail = d;
  renderCluster(clusterSection, d, act);
}

// connect follows /api/watch, with the details of one cluster when the
// cluster view is open. The browser reconnects by itself after a drop; the
// list is read again then, since deletions during the gap were missed.
// It returns whether it opened a new stream.
function connect(cluster) {
  if (stream && streamFor === cluster) return false;
  if (stream) stream.close();
  streamFor = cluster;
  const url = cluster ? `/api/watch?cluster=${encodeURIComponent(cluster)}` : '/api/watch';
  const es = new EventSource(url);
  stream = es;
  let dropped = false;
  setLive('connecting');
  es.onopen = () => {
    setLive('connected');
    if (dropped) {
      dropped = false;
      loadFleet();
    }
  };
  es.onerror = () => {
    if (stream !== es) return;
    dropped = true;
    if (es.readyState === EventSource.CLOSED) {
      // The server refused the stream (the session ended, say): the browser
      // gives up, so try again ourselves after a pause.
      setLive('disconnected');
      setTimeout(() => { if (stream === es) { stream = null; connect(cluster); } }, 3000);
    } else {
      setLive('reconnecting');
    }
  };
  es.addEventListener('cluster', (e) => fleet.upsert(JSON.parse(e.data)));
  es.addEventListener('cluster-deleted', (e) => {
    const ref = JSON.parse(e.data);
    fleet.remove(ref);
    if (route.view === 'cluster' && key(ref) === routeKey()) {
      showError(`Cluster ${key(ref)} was deleted.`);
    }
  });
  es.addEventListener('detail', (e) => {
    const d = JSON.parse(e.data);
    if (route.view === 'cluster' && key(d.summary || {}) === routeKey()) showDetail(d);
  });
  es.addEventListener('detail-error', (e) => {
    const reply = JSON.parse(e.data);
    if (route.view === 'cluster' && streamFor === routeKey()) showDetailError(reply.error || 'the cluster cannot be read');
  });
  return true;
}

function setLive(state) {
  liveEl.dataset.state = state;
  liveEl.textContent = state;
}

async function loadFleet() {
  try {
    const list = await getJSON('/api/clusters');
    fleet.replaceAll(list.clusters || []);
    fleet.setError(list.error || '');
    if (!document.body.dataset.fleetLoaded) {
      document.body.dataset.fleetLoaded = 'true';
      // Read by the benchmark: the time from navigation to every row built.
      performance.mark('capstan-fleet-rendered');
    }
  } catch (err) {
    fleet.setError(err.message);
  }
}

// The confirm dialog: one at a time, OK sends the action.
const dialog = document.querySelector('[data-testid=confirm]');
const dialogTitle = dialog.querySelector('.confirm-title');
const dialogText = dialog.querySelector('.confirm-text');
const replicasLabel = dialog.querySelector('.confirm-replicas');
const replicasInput = dialog.querySelector('[data-testid=replicas]');
const dialogError = dialog.querySelector('.confirm-error');
const okButton = dialog.querySelector('[data-testid=confirm-ok]');
let pending = null;

dialog.querySelector('.confirm-cancel').addEventListener('click', () => dialog.close());
dialog.addEventListener('close', () => { pending = null; });
dialog.querySelector('form').addEventListener('submit', async (e) => {
  e.preventDefault();
  if (!pending || okButton.disabled) return;
  const run = pending;
  let body;
  try {
    body = run.body();
  } catch (err) {
    dialogError.hidden = false;
    dialogError.textContent = err.message;
    return;
  }
  okButton.disabled = true;
  try {
    await run.send(body);
    showError(null);
    dialog.close();
  } catch (err) {
    dialog.close();
    showError(`${run.title} refused: ${err.message}`);
  } finally {
    okButton.disabled = false;
  }
});

function act(a) {
  if (route.view !== 'cluster') return;
  const { namespace, name } = route;
  const target = `${namespace}/${name}`;
  let title;
  let text;
  let body = () => ({});
  let send;
  switch (a.action) {
    case 'scale':
      title = `Scale ${a.kind} ${a.name}`;
      text = `Set the replicas of ${a.kind} ${a.name} in cluster ${target}. It has ${a.replicas ?? 'no'} desired now.`;
      body = () => {
        const replicas = Number(replicasInput.value);
        if (replicasInput.value.trim() === '' || !Number.isInteger(replicas) || replicas < 0) {
          throw new Error('replicas must be a whole number, 0 or more');
        }
        return { kind: a.kind, name: a.name, replicas };
      };
      send = (b) => postJSON(clusterPath(namespace, name, 'scale'), b);
      break;
    case 'pause':
    case 'resume': {
      const paused = a.action === 'pause';
      title = `${paused ? 'Pause' : 'Resume'} ${target}`;
      text = paused
        ? `Controllers stop acting on cluster ${target} and its objects until it is resumed.`
        : `Controllers act on cluster ${target} again.`;
      body = () => ({ paused });
      send = (b) => postJSON(clusterPath(namespace, name, 'pause'), b);
      break;
    }
    case 'rollout-restart':
      title = `Restart ${a.kind} ${a.name}`;
      text = `Replace every Machine of ${a.kind} ${a.name} with a new one, a few at a time as its rollout strategy allows.`;
      body = () => ({ kind: a.kind, name: a.name });
      send = (b) => postJSON(clusterPath(namespace, name, 'rollout-restart'), b);
      break;
    case 'kubeconfig':
      title = `Download the kubeconfig of ${target}`;
      text = 'The file holds admin credentials of the workload cluster: keep it safe.';
      send = (b) => downloadKubeconfig(namespace, name, b);
      break;
    default:
      return;
  }
  pending = { title, body, send };
  dialogTitle.textContent = title;
  dialogText.textContent = text;
  dialogError.hidden = true;
  replicasLabel.hidden = a.action !== 'scale';
  if (a.action === 'scale') replicasInput.value = a.replicas ?? '';
  okButton.textContent = a.action === 'kubeconfig' ? 'Download' : 'OK';
  dialog.showModal();
  if (a.action === 'scale') replicasInput.select();
}

// downloadKubeconfig saves the file without ever putting it on the page.
async function downloadKubeconfig(namespace, name, body) {
  const res = await post(clusterPath(namespace, name, 'kubeconfig'), body);
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = el('a', { href: url, download: `${name}.kubeconfig` });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

document.addEventListener('keydown', (e) => {
  const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement;
  if (e.key === '/' && !typing && route.view === 'fleet') {
    e.preventDefault();
    fleetSection.querySelector('[data-testid=filter]').focus();
  }
});

async function start() {
  try {
    await signInFromURL();
  } catch (err) {
    // A used address in a browser that is still signed in changes nothing.
    try {
      await session();
    } catch {
      showError(`Cannot sign in: ${err.message}`);
      return;
    }
  }
  // The list does not wait for the session: only actions need its token.
  fleetLoaded = loadFleet();
  try {
    const s = await session();
    const who = document.getElementById('who');
    who.textContent = [s.user, s.context].filter(Boolean).join(' @ ');
    who.title = s.server || '';
  } catch (err) {
    showError(`Cannot start the console: ${err.message}`);
    return;
  }
  window.addEventListener('hashchange', showRoute);
  showRoute();
}

start();
