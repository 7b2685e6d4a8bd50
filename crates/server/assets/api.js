// The JSON API client. The API key (when the server needs one) lives in
// localStorage; a 401 raises `AuthError`, which the shell answers with the
// key prompt and then retries the page.

const KEY_STORAGE = 'glassbox.apiKey';

export class AuthError extends Error {
  constructor(message, status) {
    super(message);
    this.name = 'AuthError';
    this.status = status;
  }
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export function apiKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || '';
  } catch {
    return '';
  }
}

export function setApiKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
  } catch {
    // Storage disabled (private mode): the key lasts until the page reloads.
    memoryKey = key;
  }
}

let memoryKey = '';

/** `/v1/...` with the non-empty `params` as a query string. */
export function url(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

/** GETs JSON; throws `AuthError` on 401/403 and `ApiError` on other failures. */
export async function get(path, params) {
  const headers = { Accept: 'application/json' };
  const key = apiKey() || memoryKey;
  if (key) headers.Authorization = `Bearer ${key}`;
  let res;
  try {
    res = await fetch(url(path, params), { headers, cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, 'unreachable', `the server cannot be reached (${err.message})`);
  }
  if (res.status === 401) {
    throw new AuthError(key ? 'the API key was not accepted' : 'this server needs an API key', 401);
  }
  const text = await res.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (res.status === 403) {
    const msg = body?.error?.message || 'the API key lacks the scope for this page';
    throw new AuthError(msg, 403);
  }
  if (!res.ok) {
    const err = body?.error;
    throw new ApiError(res.status, err?.code || `http_${res.status}`, err?.message || text || res.statusText);
  }
  if (body === null) throw new ApiError(res.status, 'bad_json', `${path} did not answer JSON`);
  return body;
}
