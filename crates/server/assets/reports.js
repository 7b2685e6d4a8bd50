// Cost and latency by day, per topology: line charts of P50/P95/P99 (never
// only averages) and the same numbers as a table.

import { get } from './api.js';
import { h, title, notice, listOf, fmtMillis, fmtCost } from './dom.js';
import { lineChart } from './chart.js';
import { filterForm, topologyIds, apiParams } from './traces.js';

const PCTS = [
  ['p50', 'P50'],
  ['p95', 'P95'],
  ['p99', 'P99'],
];

/** Groups of a day report, by topology, days in order. */
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
  // Per-node shares are not charted here: `nodes=false` spares the server reading spans.
  const params = { topology: filters.topology, since: filters.since, until: filters.until, group_by: 'day', nodes: 'false' };
  const [report, topologies] = await Promise.all([get('/v1/reports', params), topologyIds()]);
  view.append(title('Reports'),
    h('p', { class: 'lead' }, 'Cost per request and latency per request by UTC day, as P50, P95 and P99.'),
    filterForm(ctx.query, topologies, (q) => ctx.navigate(`#/reports${q.toString() ? `?${q}` : ''}`),
      { withStatus: false, withSort: false, testid: 'report-filters' }));
  const tops = byTopology(report);
  if (!tops.size) {
    view.append(notice('No requests in this range yet.'));
    return;
  }
  for (const [topo, groups] of tops) {
    const days = groups.map((g) => String(g.group));
    const currency = groups.find((g) => g.currency)?.currency ?? '';
    const slug = topo.replace(/[^a-z0-9_-]/gi, '_');
    view.append(h('section', { class: 'report', 'aria-labelledby': `rep-${slug}`, testid: 'report-topology', 'data-topology': topo },
      h('h2', { id: `rep-${slug}` }, h('a', { href: `#/topologies/${encodeURIComponent(topo)}` }, topo)),
      h('div', { class: 'charts' },
        lineChart({
          title: 'Cost per request', categories: days, series: series(groups, 'cost'),
          format: (v) => fmtCost(v), yLabel: currency ? `Cost (${currency})` : 'Cost', testid: 'cost-chart',
        }),
        lineChart({
          title: 'Latency per request', categories: days, series: series(groups, 'latency_ms'),
          format: fmtMillis, yLabel: 'Latency (ms)', testid: 'latency-chart',
        })),
      dayTable(topo, groups)));
  }
}

function dayTable(topo, groups) {
  const pct = (p) => (p ? PCTS.map(([k]) => p[k]) : [null, null, null]);
  return h('details', { class: 'report-table' },
    h('summary', {}, `The numbers (${groups.length} day${groups.length === 1 ? '' : 's'})`),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'report-table' },
      h('caption', { class: 'visually-hidden' }, `${topo} by day`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Day'), h('th', { scope: 'col', class: 'num' }, 'Requests'),
        h('th', { scope: 'col', class: 'num' }, 'Errors'),
        PCTS.map(([, n]) => h('th', { scope: 'col', class: 'num' }, `Latency ${n}`)),
        PCTS.map(([, n]) => h('th', { scope: 'col', class: 'num' }, `Cost ${n}`)),
        h('th', { scope: 'col', class: 'num' }, 'Cost total'))),
      h('tbody', {}, groups.map((g) => h('tr', {},
        h('th', { scope: 'row' }, String(g.group)),
        h('td', { class: 'num' }, String(g.requests ?? '–')),
        h('td', { class: 'num' }, g.error_rate === undefined ? '–' : `${(100 * g.error_rate).toFixed(1)}%`),
        pct(g.latency_ms).map((v) => h('td', { class: 'num' }, fmtMillis(v))),
        pct(g.cost).map((v) => h('td', { class: 'num' }, fmtCost(v))),
        h('td', { class: 'num' }, fmtCost(g.cost_total))))))));
}
