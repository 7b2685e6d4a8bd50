// Small DOM and formatting helpers shared by every page. No framework: pages
// build elements with `h()` and replace the contents of <main>.

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Sets attributes, properties and children on an element. */
function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') Object.assign(el.style, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'testid') el.setAttribute('data-testid', v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: `h('a', {href: '#/'}, 'home')`. */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces the children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** `1234` µs → `1.2 ms`; seconds past 10 s. */
export function fmtMicros(us) {
  if (us === null || us === undefined || Number.isNaN(Number(us))) return '–';
  return fmtMillis(Number(us) / 1000);
}

export function fmtMillis(ms) {
  if (ms === null || ms === undefined || Number.isNaN(Number(ms))) return '–';
  const v = Number(ms);
  if (v >= 10000) return `${(v / 1000).toFixed(1)} s`;
  if (v >= 100) return `${v.toFixed(0)} ms`;
  return `${v.toFixed(1)} ms`;
}

/** A cost (decimal string or number) with its currency, trailing zeros dropped. */
export function fmtCost(value, currency) {
  if (value === null || value === undefined || value === '') return '–';
  const n = Number(value);
  let text;
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) text = value;
  else if (!Number.isFinite(n)) return String(value);
  else text = n === 0 ? '0' : Math.abs(n) < 0.0001 ? n.toExponential(2) : String(+n.toPrecision(6));
  return currency ? `${text} ${currency}` : text;
}

/** Microseconds since the epoch → `2026-11-30 12:00:03` (UTC). */
export function fmtTime(us) {
  if (!us && us !== 0) return '–';
  const d = new Date(Number(us) / 1000);
  if (Number.isNaN(d.getTime())) return '–';
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, '') + ' UTC';
}

/** A status word as a badge. */
export function badge(status) {
  const word = String(status || 'unknown');
  return h('span', { class: `badge status-${word.replace(/[^a-z_]/gi, '')}` }, word.replace(/_/g, ' '));
}

/** A page heading that receives focus after navigation. */
export function title(text, ...extra) {
  return h('h1', { tabindex: '-1', 'data-page-title': true }, text, ...extra);
}

/** A short message standing in for data: loading, empty, failed. */
export function notice(text, kind = 'muted') {
  return h('p', { class: kind, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** The first array found in a response: `[..]`, `{items:[..]}`, `{traces:[..]}`, ... */
export function listOf(value, ...keys) {
  if (Array.isArray(value)) return value;
  if (value && typeof value === 'object') {
    for (const k of [...keys, 'items', 'data', 'results']) {
      if (Array.isArray(value[k])) return value[k];
    }
  }
  return [];
}
