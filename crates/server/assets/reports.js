// Reports: per topology, cost and latency (P50/P95/P99, never only
// averages) in time buckets from a minute to a week, the path mix over
// time, and each node's P50/P95/P99 and share of the cost. Every point,
// bar segment and node row links to the Traces page filtered to the
// requests behind it.
//
// The page is a list of panels, one function each, so panels can be added
// without touching the others. Three are placeholders the coordinator wires
// after merging (see the PANEL comments): version comparison, critical-path
// share and firing alerts.

import { get } from './api.js';
import { h, title, notice, listOf, fmtMillis, fmtCost } from './dom.js';
import { lineChart, shareChart } from './chart.js';
import { filterForm, topologyIds, apiParams, select, pathText } from './traces.js';

const PCTS = [
  ['p50', 'P50'],
  ['p95', 'P95'],
  ['p99', 'P99'],
];

/** Bucket sizes the API offers (`group_by`), with their length in seconds. */
export const BUCKETS = [
  ['1m', 'Minute', 60],
  ['5m', '5 minutes', 300],
  ['15m', '15 minutes', 900],
  ['1h', 'Hour', 3600],
  ['6h', '6 hours', 21600],
  ['1d', 'Day', 86400],
  ['1w', 'Week', 604800],
];
const DEFAULT_BUCKET = '1d';

/** The bucket the URL asks for (`bucket=1h`), or the default. */
export function bucketOf(query) {
  const b = query.get('bucket');
  return BUCKETS.find(([k]) => k === b) || BUCKETS.find(([k]) => k === DEFAULT_BUCKET);
}

/** Groups of a report, by topology, in time order. */
export function byTopology(report) {
  const groups = listOf(report, 'groups');
  const out = new Map();
  for (const g of groups) {
    const id = g.topology_id ?? g.topology ?? '';
    if (!out.has(id)) out.set(id, []);
    out.get(id).push(g);
  }
  for (const list of out.values()) list.sort((a, b) => String(a.group).localeCompare(String(b.group)));
  return out;
}

/** A bucket's start (`2026-12-01T19:25:00Z`) → Unix seconds, or null. */
export function bucketStart(group) {
  const ms = Date.parse(String(group));
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null;
}

/** A short x label for a bucket start: the date for days and weeks, else `12-01 19:25`. */
export function bucketLabel(group, seconds) {
  const s = String(group);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(s)) return s;
  if (seconds >= 86400) return s.slice(0, 10);
  return `${s.slice(5, 10)} ${s.slice(11, 16)}`;
}

/** The Traces page for one topology and time range (Unix seconds, `until` exclusive). */
export function tracesLink(topology, since, until, extra = {}) {
  const q = new URLSearchParams();
  if (topology) q.set('topology', topology);
  if (since !== null && since !== undefined) {
    q.set('range', 'custom');
    q.set('since', String(since));
    if (until !== null && until !== undefined) q.set('until', String(until));
  }
  for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
  return `#/traces?${q}`;
}

/** The traces behind one bucket of a topology's report. */
function bucketLink(topo, group, seconds) {
  const start = bucketStart(group);
  return start === null ? null : tracesLink(topo, start, start + seconds);
}

/** The range the filters select, as Unix seconds (for links that span it). */
function rangeBounds(filters) {
  const now = Math.floor(Date.now() / 1000);
  const age = /^(\d+)([mhd])$/.exec(filters.since || '');
  if (age) {
    const unit = { m: 60, h: 3600, d: 86400 }[age[2]];
    return { since: now - Number(age[1]) * unit, until: null };
  }
  const since = /^\d+$/.test(filters.since || '') ? filters.since : null;
  const until = /^\d+$/.test(filters.until || '') ? filters.until : null;
  return { since, until };
}

function series(groups, field) {
  return PCTS.map(([key, name]) => ({
    key,
    name,
    values: groups.map((g) => {
      const v = g[field]?.[key];
      return v === null || v === undefined ? null : Number(v);
    }),
  }));
}

export async function reportsPage(view, _arg, ctx) {
  const filters = apiParams(ctx.query);
  const [bucket, bucketName, seconds] = bucketOf(ctx.query);
  const base = { topology: filters.topology, since: filters.since, until: filters.until };
  // Buckets need no spans (`nodes=false` spares the server reading them);
  // the node panel reads them once, for the whole range.
  const [timeline, whole, topologies] = await Promise.all([
    get('/v1/reports', { ...base, group_by: bucket, nodes: 'false' }),
    get('/v1/reports', { ...base, group_by: 'all', nodes: 'true' }),
    topologyIds(),
  ]);
  const bucketField = select('f-bucket', 'Bucket', BUCKETS.map(([k, name]) => [k, name]), bucket);
  view.append(title('Reports'),
    h('p', { class: 'lead' },
      `Cost and latency per request by ${bucketName.toLowerCase()} (UTC), as P50, P95 and P99; the path mix over time; `
      + 'and each node’s latency and share of the cost. Click a point, a bar or a node to see the traces behind it.'),
    filterForm(ctx.query, topologies, (q) => ctx.navigate(`#/reports${q.toString() ? `?${q}` : ''}`),
      { withStatus: false, withSort: false, testid: 'report-filters', extra: [bucketField] }));
  const alerts = alertsPanel(ctx);
  if (alerts) view.append(alerts);
  const tops = byTopology(timeline);
  if (!tops.size) {
    view.append(notice('No requests in this range yet.'));
    return;
  }
  const totals = byTopology(whole);
  const range = rangeBounds(filters);
  for (const [topo, groups] of tops) {
    const cx = { topo, groups, whole: totals.get(topo)?.[0], bucket, seconds, range, ctx };
    const slug = topo.replace(/[^a-z0-9_-]/gi, '_');
    const panels = [
      latencyCostPanel(cx),
      pathPanel(cx),
      nodesPanel(cx),
      criticalPathPanel(cx),
      versionComparePanel(cx),
      bucketTable(cx),
    ].filter(Boolean);
    view.append(h('section', { class: 'report', 'aria-labelledby': `rep-${slug}`, testid: 'report-topology', 'data-topology': topo },
      h('h2', { id: `rep-${slug}` }, h('a', { href: `#/topologies/${encodeURIComponent(topo)}` }, topo)),
      ...panels));
  }
}

/** Cost and latency per request over time; each point links to its bucket's traces. */
function latencyCostPanel({ topo, groups, bucket, seconds }) {
  const labels = groups.map((g) => bucketLabel(g.group, seconds));
  const currency = groups.find((g) => g.currency)?.currency ?? '';
  const xLabel = `Time (UTC, ${bucket} buckets)`;
  const href = (i) => bucketLink(topo, groups[i].group, seconds);
  return h('div', { class: 'charts' },
    lineChart({
      title: 'Cost per request', categories: labels, series: series(groups, 'cost'), xLabel, href,
      format: (v) => fmtCost(v), yLabel: currency ? `Cost (${currency})` : 'Cost', testid: 'cost-chart',
    }),
    lineChart({
      title: 'Latency per request', categories: labels, series: series(groups, 'latency_ms'), xLabel, href,
      format: fmtMillis, yLabel: 'Latency (ms)', testid: 'latency-chart',
    }));
}

/** Which paths requests took, bucket by bucket (stacked shares). */
function pathPanel({ topo, groups, bucket, seconds }) {
  const counts = new Map();
  for (const g of groups) {
    for (const p of listOf(g, 'paths')) counts.set(p.key, (counts.get(p.key) || 0) + Number(p.count || 0));
  }
  if (!counts.size) return null;
  const keys = [...counts.keys()].sort((a, b) => counts.get(b) - counts.get(a) || a.localeCompare(b));
  const named = (k) => pathText(k) || '(no node ran)';
  return h('div', { class: 'report-panel', testid: 'path-panel' },
    shareChart({
      title: 'Path mix over time',
      categories: groups.map((g) => bucketLabel(g.group, seconds)),
      stacks: groups.map((g) => listOf(g, 'paths').map((p) => ({ ...p, key: named(p.key) }))),
      keys: keys.map(named),
      xLabel: `Time (UTC, ${bucket} buckets)`,
      testid: 'path-chart',
      href: (i) => bucketLink(topo, groups[i].group, seconds),
    }));
}

/** Each node's latency percentiles and share of the cost over the whole range. */
function nodesPanel({ topo, whole, range }) {
  const nodes = listOf(whole, 'nodes');
  if (!nodes.length) return null;
  const link = tracesLink(topo, range.since, range.until, { sort: 'slowest' });
  return h('div', { class: 'report-panel', testid: 'nodes-panel' },
    h('h3', {}, 'Nodes'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'node-table' },
      h('caption', { class: 'visually-hidden' }, `${topo}: latency and cost share per node`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Node'), h('th', { scope: 'col', class: 'num' }, 'Attempts'),
        PCTS.map(([, n]) => h('th', { scope: 'col', class: 'num' }, `Latency ${n}`)),
        h('th', { scope: 'col', class: 'num' }, 'Errors'),
        h('th', { scope: 'col', class: 'num' }, 'Cost'),
        h('th', { scope: 'col' }, 'Cost share'))),
      h('tbody', {}, nodes.map((n) => {
        const share = Number(n.cost_share || 0);
        return h('tr', { testid: 'node-row', 'data-node': n.node },
          h('th', { scope: 'row' }, h('a', { href: link, title: `slowest ${topo} requests in this range` }, n.node)),
          h('td', { class: 'num' }, String(n.spans ?? '–')),
          PCTS.map(([k]) => h('td', { class: 'num' }, fmtMillis(n.latency_ms?.[k]))),
          h('td', { class: 'num' }, n.error_rate === undefined ? '–' : `${(100 * n.error_rate).toFixed(1)}%`),
          h('td', { class: 'num' }, fmtCost(n.cost_total)),
          h('td', { 'data-share': share.toFixed(4) },
            h('span', { class: 'share-bar', style: { width: `${Math.round(share * 8 * 10) / 10}rem` }, 'aria-hidden': 'true' }),
            `${(100 * share).toFixed(1)}%`));
      })))));
}

// PANEL: critical-path share (issue #16 item 4). Wire to the report's
// critical-path numbers (which nodes set end-to-end latency, and their share
// of it) once they are merged; return an element, or null to show nothing.
function criticalPathPanel(_cx) {
  return null;
}

// PANEL: version comparison (issue #16 item 1). Wire to
// `GET /v1/reports/compare` (cost, per-node P50/P95/P99, path mix, guard and
// error rates of two versions side by side, differences beyond noise
// marked); return an element, or null to show nothing.
function versionComparePanel(_cx) {
  return null;
}

// PANEL: firing alerts (issue #16 item 5). Wire to `GET /v1/alerts` (route
// shifts, P99 regressions, cost jumps with their evidence); shown once above
// the topologies; return an element, or null to show nothing.
function alertsPanel(_ctx) {
  return null;
}

/** The numbers behind the charts, one row per bucket, each linking to its traces. */
function bucketTable({ topo, groups, seconds }) {
  const pct = (p) => (p ? PCTS.map(([k]) => p[k]) : [null, null, null]);
  return h('details', { class: 'report-table' },
    h('summary', {}, `The numbers (${groups.length} bucket${groups.length === 1 ? '' : 's'})`),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'report-table' },
      h('caption', { class: 'visually-hidden' }, `${topo} by time bucket`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Bucket (UTC)'), h('th', { scope: 'col', class: 'num' }, 'Requests'),
        h('th', { scope: 'col', class: 'num' }, 'Errors'),
        PCTS.map(([, n]) => h('th', { scope: 'col', class: 'num' }, `Latency ${n}`)),
        PCTS.map(([, n]) => h('th', { scope: 'col', class: 'num' }, `Cost ${n}`)),
        h('th', { scope: 'col', class: 'num' }, 'Cost total'))),
      h('tbody', {}, groups.map((g) => {
        const link = bucketLink(topo, g.group, seconds);
        const label = bucketLabel(g.group, seconds);
        return h('tr', {},
          h('th', { scope: 'row' }, link ? h('a', { href: link }, label) : label),
          h('td', { class: 'num' }, String(g.requests ?? '–')),
          h('td', { class: 'num' }, g.error_rate === undefined ? '–' : `${(100 * g.error_rate).toFixed(1)}%`),
          pct(g.latency_ms).map((v) => h('td', { class: 'num' }, fmtMillis(v))),
          pct(g.cost).map((v) => h('td', { class: 'num' }, fmtCost(v))),
          h('td', { class: 'num' }, fmtCost(g.cost_total)));
      })))));
}
