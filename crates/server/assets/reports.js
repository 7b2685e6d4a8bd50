// Reports: per topology, cost and latency (P50/P95/P99, never only
// averages) in time buckets from a minute to a week, the path mix over
// time, and each node's P50/P95/P99 and share of the cost. Every point,
// bar segment and node row links to the Traces page filtered to the
// requests behind it.
//
// The page is a list of panels, one function each, so panels can be added
// without touching the others; a panel returns an element, null, or a
// promise of one (the page is ready once every panel has rendered). Besides
// the charts: the nodes most often on the critical path, two versions side
// by side with the differences beyond noise marked, and the drift alerts
// firing.

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
  const alerts = await alertsPanel({ filters, range: rangeBounds(filters) });
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
    const panels = (await Promise.all([
      latencyCostPanel(cx),
      pathPanel(cx),
      nodesPanel(cx),
      criticalPathPanel(cx),
      versionComparePanel({ ...cx, filters }),
      bucketTable(cx),
    ])).filter(Boolean);
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

/** The nodes that set end-to-end latency most often (the critical path,
 * which with parallel branches is not the sum of the nodes), and their share
 * of it. */
function criticalPathPanel({ topo, whole, range }) {
  const shares = listOf(whole, 'critical_path');
  if (!shares.length) return null;
  const link = tracesLink(topo, range.since, range.until, { sort: 'slowest' });
  return h('div', { class: 'report-panel', testid: 'critical-panel' },
    h('h3', {}, 'Critical path'),
    h('p', { class: 'muted' },
      'The chain of nodes that set each request’s latency (parallel branches that finished earlier are not on it): '
      + 'how often each node was on it, and what share of the latency it set.'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'critical-table' },
      h('caption', { class: 'visually-hidden' }, `${topo}: nodes on the critical path`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Node'),
        h('th', { scope: 'col', class: 'num' }, 'On the path'),
        h('th', { scope: 'col', class: 'num' }, 'Added (mean)'),
        h('th', { scope: 'col' }, 'Share of latency'))),
      h('tbody', {}, shares.map((c) => {
        const share = Number(c.latency_share || 0);
        return h('tr', { testid: 'critical-row', 'data-node': c.node },
          h('th', { scope: 'row' }, h('a', { href: link, title: `slowest ${topo} requests in this range` }, c.node)),
          h('td', { class: 'num' }, `${(100 * Number(c.rate || 0)).toFixed(1)}% (${c.requests})`),
          h('td', { class: 'num' }, fmtMillis(c.added_ms_mean)),
          h('td', { 'data-share': share.toFixed(4) },
            h('span', { class: 'share-bar', style: { width: `${Math.round(share * 8 * 10) / 10}rem` }, 'aria-hidden': 'true' }),
            `${(100 * share).toFixed(1)}%`));
      })))));
}

/** Two versions of the topology side by side (the two with the most
 * requests in the range, or `a`/`b` in the URL), each difference larger than
 * noise marked with the test that says so. */
async function versionComparePanel({ topo, range, filters, ctx }) {
  const base = { topology: topo, since: filters.since, until: filters.until };
  const byVersion = listOf(await get('/v1/reports', { ...base, group_by: 'version', nodes: 'false' }), 'groups')
    .filter((g) => g.topology_id === topo)
    .sort((x, y) => Number(y.requests || 0) - Number(x.requests || 0));
  if (byVersion.length < 2) return null;
  const versions = byVersion.map((g) => g.group);
  const want = (k, dflt) => (versions.includes(ctx.query.get(k)) ? ctx.query.get(k) : dflt);
  const [a, b] = [want('a', versions[1]), want('b', versions[0])].sort();
  const cmp = await get('/v1/reports/compare', { ...base, a, b });
  const link = tracesLink(topo, range.since, range.until);
  const mark = (test) => (test?.significant
    ? h('span', { class: 'marked', testid: 'compare-mark', title: `${test.test}, p = ${test.p_value.toPrecision(2)}` }, '★')
    : '');
  const pval = (test) => (test ? test.p_value.toPrecision(2) : 'n/a');
  const row = (name, va, vb, test) => h('tr', { testid: 'compare-row', 'data-measure': name, 'data-marked': String(!!test?.significant) },
    h('th', { scope: 'row' }, name),
    h('td', { class: 'num' }, va), h('td', { class: 'num' }, vb),
    h('td', { class: 'num' }, pval(test)), h('td', {}, mark(test)));
  const pct = (d, k, f) => (d && d.n ? f(d[k]) : '–');
  const rows = [row('Requests', String(cmp.requests.a), String(cmp.requests.b), cmp.requests.test)];
  for (const [k, n] of PCTS) {
    rows.push(row(`Latency ${n}`, pct(cmp.latency_ms.a, k, fmtMillis), pct(cmp.latency_ms.b, k, fmtMillis),
      k === 'p50' ? cmp.latency_ms.test : null));
  }
  for (const [k, n] of PCTS) {
    rows.push(row(`Cost ${n}`, pct(cmp.cost.a, k, fmtCost), pct(cmp.cost.b, k, fmtCost), k === 'p50' ? cmp.cost.test : null));
  }
  const rate = (r) => (r && r.n ? `${(100 * r.rate).toFixed(1)}% (${r.hits}/${r.n})` : '–');
  for (const r of listOf(cmp, 'rates')) rows.push(row(r.name, rate(r.a), rate(r.b), r.test));
  for (const p of listOf(cmp, 'paths')) rows.push(row(`Path ${pathText(p.path) || p.path}`, rate(p.a), rate(p.b), null));
  for (const n of listOf(cmp, 'nodes')) {
    rows.push(row(`${n.node}: latency P99`, pct(n.latency_ms.a, 'p99', fmtMillis), pct(n.latency_ms.b, 'p99', fmtMillis), n.latency_ms.test));
    rows.push(row(`${n.node}: errors`, rate(n.error_rate.a), rate(n.error_rate.b), n.error_rate.test));
  }
  return h('div', { class: 'report-panel', testid: 'compare-panel', 'data-a': a, 'data-b': b },
    h('h3', {}, `Versions ${a} and ${b}`),
    h('p', { class: 'muted' },
      `★ marks a difference larger than noise (${cmp.method}; family-wise α ${cmp.alpha}). `
      + `The path mix as a whole: p = ${pval(cmp.path_test)}${cmp.path_test?.significant ? ' ★' : ''}. `
      + 'Other versions: add a= and b= to the address. ',
      h('a', { href: link }, 'The traces behind it')),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'compare-table' },
      h('caption', { class: 'visually-hidden' }, `${topo}: version ${a} vs ${b}`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Measure'), h('th', { scope: 'col', class: 'num' }, a),
        h('th', { scope: 'col', class: 'num' }, b), h('th', { scope: 'col', class: 'num' }, 'p'),
        h('th', { scope: 'col' }, ''))),
      h('tbody', {}, rows))));
}

/** Drift alerts firing (route-ratio shifts, node P99 regressions, cost
 * jumps), each with its evidence and a link to the traces of its window;
 * shown once, above the topologies. */
async function alertsPanel({ filters }) {
  let ev;
  try {
    ev = await get('/v1/alerts', { topology: filters.topology });
  } catch (err) {
    return h('div', { class: 'report-panel', testid: 'alerts-panel' }, notice(`Drift alerts: ${err.message}`));
  }
  const alerts = listOf(ev, 'alerts');
  const secs = (us) => Math.floor(Number(us) / 1e6);
  const when = `current window from ${new Date(Number(ev.window_from_us) / 1000).toISOString().slice(0, 16)}Z `
    + `against the baseline before it`;
  if (!alerts.length) {
    return h('div', { class: 'report-panel', testid: 'alerts-panel', 'data-firing': '0' },
      h('h3', {}, 'Drift alerts'),
      h('p', { class: 'muted', testid: 'alerts-none' }, `None firing (${when}).`));
  }
  const side = (x) => `${Number(x.value).toPrecision(3)} (n ${x.samples})`;
  return h('div', { class: 'report-panel alerts', testid: 'alerts-panel', 'data-firing': String(alerts.length) },
    h('h3', {}, `Drift alerts firing: ${alerts.length}`),
    h('p', { class: 'muted' }, `${when}.`),
    h('ul', {}, alerts.map((al) => h('li', { testid: 'alert', 'data-kind': al.kind },
      h('strong', {}, `${al.kind} · ${al.topology}${al.node ? ` · ${al.node}` : ''}: `),
      al.message, ' ',
      h('span', { class: 'muted' },
        `baseline ${side(al.baseline)}, now ${side(al.current)}; ${al.test} p = ${Number(al.p_value).toPrecision(2)} < ${Number(al.level).toPrecision(2)}. `),
      h('a', { href: tracesLink(al.topology, secs(ev.window_from_us), secs(ev.until_us)) }, 'traces')))));
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
