// The console's HTTP API (docs/console.md). The session cookie rides along
// on every request; POSTs also carry the CSRF token /api/session handed out.

let csrfToken = '';

export class APIError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// signInFromURL exchanges the access token of the page's address (its
// fragment, #token=..., which the browser never sent to the server) for a
// session cookie, once: the token is first removed from the address and
// from this page's history entry, and the server replaces it on use.
export async function signInFromURL() {
  const m = /^#token=([0-9a-f]+)$/.exec(window.location.hash);
  if (!m) return;
  history.replaceState(null, '', window.location.pathname);
  const res = await fetch('/api/login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token: m[1] }),
  });
  if (!res.ok) throw await failure(res);
}

// session reads who the console acts as and keeps the CSRF token.
export async function session() {
  const s = await getJSON('/api/session');
  csrfToken = s.csrfToken || '';
  return s;
}

export async function getJSON(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
  if (!res.ok) throw await failure(res);
  return res.json();
}

// post sends an action and returns the response; a refusal becomes an
// APIError carrying the server's own message (RBAC's 403 text, a conflict).
export async function post(path, body) {
  const res = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken },
    body: JSON.stringify(body || {}),
  });
  if (!res.ok) throw await failure(res);
  return res;
}

// postJSON sends an action whose reply is {"ok":true} or {"error","code"}.
export async function postJSON(path, body) {
  const res = await post(path, body);
  const reply = await res.json().catch(() => ({}));
  if (reply && reply.error) throw new APIError(reply.error, res.status, reply.code);
  return reply;
}

async function failure(res) {
  let message = '';
  let code;
  try {
    const text = await res.text();
    try {
      const reply = JSON.parse(text);
      message = reply.error || reply.message || '';
      code = reply.code;
    } catch {
      message = text.trim();
    }
  } catch {
    // the body is lost; the status line below still says what happened
  }
  if (res.status === 401 && !message) {
    message = 'not signed in, or the session ended: open the console\'s current address (capstan status prints the plane\'s)';
  }
  return new APIError(message || `${res.status} ${res.statusText}`, res.status, code);
}

export function clusterPath(ns, name, action) {
  const base = `/api/clusters/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  return action ? `${base}/${action}` : base;
}
