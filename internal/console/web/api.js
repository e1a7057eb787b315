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
    message = 'the session has expired: open the address `capstan ui` printed again';
  }
  return new APIError(message || `${res.status} ${res.statusText}`, res.status, code);
}

export function clusterPath(ns, name, action) {
  const base = `/api/clusters/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  return action ? `${base}/${action}` : base;
}
