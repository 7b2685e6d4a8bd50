// The trace list: filters (kept in the URL, so a filtered view can be
// shared or bookmarked) and a table of matching requests.

import { get, ApiError } from './api.js';
import { h, title, notice, listOf, fmtMicros, fmtCost, fmtTime, badge } from './dom.js';

const RANGES = [
  ['', 'Any time'],
  ['1h', 'Last hour'],
  ['24h', 'Last 24 hours'],
  ['7d', 'Last 7 days'],
  ['30d', 'Last 30 days'],
  ['custom', 'Custom…'],
];
const SORTS = [
  ['recent', 'Most recent'],
  ['slowest', 'Slowest'],
  ['costliest', 'Costliest'],
];
const STATUSES = [
  ['', 'Any status'],
  ['ok', 'ok'],
  ['failed', 'failed'],
  ['cancelled', 'cancelled'],
];

/** `2026-11-30T12:00` (local, from <input type=datetime-local>) → Unix seconds. */
export function localToUnix(value) {
  if (!value) return '';
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? String(Math.floor(ms / 1000)) : '';
}

/** A custom-range bound from the URL: Unix seconds as they are (links from
 * the Reports page carry them), else a local date-time from the form. */
export function boundToUnix(value) {
  if (/^\d+$/.test(value || '')) return value;
  return localToUnix(value);
}

/** Unix seconds → `2026-11-30T12:00` in local time, for <input type=datetime-local>. */
export function unixToLocal(value) {
  if (!/^\d+$/.test(value || '')) return value || '';
  const d = new Date(Number(value) * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The API query for the URL's filters. */
export function apiParams(query) {
  const range = query.get('range') || '';
  const p = {
    topology: query.get('topology') || '',
    status: query.get('status') || '',
    sort: query.get('sort') || 'recent',
    limit: query.get('limit') || '100',
  };
  if (range === 'custom') {
    p.since = boundToUnix(query.get('since'));
    p.until = boundToUnix(query.get('until'));
  } else if (range) {
    p.since = range;
  }
  return p;
}

export function select(id, label, options, value) {
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('select', { id, name: id.replace(/^f-/, ''), testid: `filter-${id.replace(/^f-/, '')}` },
      options.map(([v, text]) => h('option', { value: v, selected: v === value }, text))));
}

/** The filter form; `topologies` may be null when they could not be listed. */
export function filterForm(query, topologies, onApply, { withStatus = true, withSort = true, testid = 'trace-filters', extra = [] } = {}) {
  const range = query.get('range') || '';
  const topo = query.get('topology') || '';
  const topoField = topologies
    ? select('f-topology', 'Topology', [['', 'All topologies'], ...topologies.map((t) => [t, t])], topo)
    : h('div', { class: 'field' }, h('label', { for: 'f-topology' }, 'Topology'),
      h('input', { id: 'f-topology', name: 'topology', value: topo, testid: 'filter-topology' }));
  const custom = h('div', { class: 'custom-range', hidden: range !== 'custom' },
    h('div', { class: 'field' }, h('label', { for: 'f-since' }, 'From'),
      h('input', { id: 'f-since', name: 'since', type: 'datetime-local', value: unixToLocal(query.get('since')) })),
    h('div', { class: 'field' }, h('label', { for: 'f-until' }, 'Until'),
      h('input', { id: 'f-until', name: 'until', type: 'datetime-local', value: unixToLocal(query.get('until')) })));
  const rangeField = select('f-range', 'Time range', RANGES, range);
  rangeField.querySelector('select').addEventListener('change', (ev) => {
    custom.hidden = ev.target.value !== 'custom';
  });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter traces', testid },
    topoField,
    withStatus ? select('f-status', 'Status', STATUSES, query.get('status') || '') : null,
    rangeField,
    custom,
    withSort ? select('f-sort', 'Sort', SORTS, query.get('sort') || 'recent') : null,
    ...extra,
    h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'primary', testid: 'filter-apply' }, 'Apply')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) {
      if (!v) continue;
      if ((k === 'since' || k === 'until') && form.elements.range.value !== 'custom') continue;
      if (k === 'sort' && v === 'recent') continue;
      q.set(k, String(v));
    }
    onApply(q);
  });
  return form;
}

/** Topology ids for the filter, or null when they cannot be listed. */
export async function topologyIds() {
  try {
    const body = await get('/v1/topologies');
    return listOf(body, 'topologies').map((t) => t.id ?? t.topology_id ?? t.name).filter(Boolean);
  } catch (err) {
    if (err instanceof ApiError) return null;
    throw err;
  }
}

export async function tracesPage(view, _arg, ctx) {
  const filters = apiParams(ctx.query);
  const [body, topologies] = await Promise.all([get('/v1/traces', filters), topologyIds()]);
  const rows = listOf(body, 'traces', 'requests');
  view.append(title('Traces'),
    filterForm(ctx.query, topologies, (q) => ctx.navigate(`#/traces${q.toString() ? `?${q}` : ''}`)));
  if (!rows.length) {
    view.append(notice('No requests match these filters.'));
    return;
  }
  view.append(
    h('p', { class: 'muted', role: 'status' }, `${rows.length} request${rows.length === 1 ? '' : 's'}`),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'trace-table', class: 'traces' },
      h('caption', { class: 'visually-hidden' }, 'Requests'),
      h('thead', {}, h('tr', {},
        ['Request', 'Topology', 'Status', 'Started', 'Latency', 'Cost', 'Path'].map((c) =>
          h('th', { scope: 'col', class: c === 'Latency' || c === 'Cost' ? 'num' : null }, c)))),
      h('tbody', {}, rows.map(traceRow)))));
  const limit = Number(filters.limit);
  if (rows.length >= limit) {
    const more = new URLSearchParams(ctx.query);
    more.set('limit', String(limit * 2));
    view.append(h('p', {}, h('a', { href: `#/traces?${more}`, testid: 'trace-more' }, `Show up to ${limit * 2}`)));
  }
}

function traceRow(r) {
  const id = r.request_id ?? r.id;
  return h('tr', { testid: 'trace-row', 'data-request-id': id, 'data-status': r.status },
    h('th', { scope: 'row' }, h('a', { href: `#/traces/${encodeURIComponent(id)}`, class: 'mono' }, id)),
    h('td', {}, `${r.topology_id ?? r.topology ?? ''}@${r.version ?? ''}`),
    h('td', {}, badge(r.status), r.degraded ? h('span', { class: 'badge status-degraded', title: 'a fallback ran' }, 'degraded') : null,
      r.error_code ? h('span', { class: 'muted small' }, ` ${r.error_code}`) : null),
    h('td', { class: 'nowrap' }, fmtTime(r.started_at_us)),
    h('td', { class: 'num' }, fmtMicros(r.duration_us)),
    h('td', { class: 'num' }, fmtCost(r.cost, r.currency)),
    h('td', { class: 'path' }, pathText(r.path)));
}

/** The path as `route → answer → check`, whatever shape the API gives. */
export function pathText(path) {
  if (!path) return '';
  if (typeof path === 'string') return path.split(/\s*(?:>|,|→|->)\s*/).filter(Boolean).join(' → ');
  if (Array.isArray(path)) return path.join(' → ');
  if (Array.isArray(path.nodes)) return path.nodes.filter((n) => n.status !== 'skipped' && n.status !== 'not_run').map((n) => n.id).join(' → ');
  return '';
}
