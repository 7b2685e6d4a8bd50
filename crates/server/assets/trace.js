// One request: header, the path through the topology (taken edges
// highlighted, skipped branches greyed), a waterfall of every attempt (each
// row expands to the node's input and output summaries, tags and usage), the
// cost receipt and the plain-language explanation.

import { get } from './api.js';
import { h, title, fmtMicros, fmtMillis, fmtCost, fmtTime, badge } from './dom.js';
import { drawGraph } from './graph.js';
import { niceTicks } from './chart.js';

/** Node statuses that mean the node ran on this request's path. */
const ON_PATH = new Set(['succeeded', 'fell_back', 'failed']);

const NODE_STATE = {
  succeeded: 'taken',
  fell_back: 'fellback',
  failed: 'failed',
  skipped: 'skipped',
  not_run: 'notrun',
  cancelled: 'cancelled',
};

/** Splits the API answer into the request record and its spans. */
export function splitTrace(body) {
  const record = body.record ?? body.request ?? body.trace ?? body;
  const spans = body.spans ?? record.spans ?? [];
  return { record, spans };
}

export async function tracePage(view, id, ctx) {
  const body = await get(`/v1/traces/${encodeURIComponent(id)}`);
  const { record: r, spans } = splitTrace(body);
  const path = r.path ?? { nodes: [], edges: [] };
  const receipt = r.receipt ?? { lines: [], total: '0', currency: '' };
  const topo = r.topology_id ?? r.topology;

  view.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/traces' }, 'Traces'), ' / '),
    title('Request ', h('span', { class: 'mono', testid: 'trace-id' }, r.request_id ?? id)),
    h('dl', { class: 'facts', testid: 'trace-header' },
      fact('Topology', h('a', { href: `#/topologies/${encodeURIComponent(topo)}` }, `${topo}@${r.version ?? ''}`)),
      fact('Status', badge(r.status), r.degraded ? h('span', { class: 'badge status-degraded' }, 'degraded: a fallback ran') : null),
      fact('Started', fmtTime(r.started_at_us)),
      fact('Duration', fmtMicros(r.duration_us)),
      fact('Cost', h('span', {}, fmtCost(receipt.total, receipt.currency))),
      r.worker ? fact('Worker', r.worker) : null),
  );
  if (r.error) {
    view.append(h('p', { class: 'error', role: 'alert', testid: 'trace-error' },
      `${r.error.message} [${r.error.code}]`,
      r.error.node ? ` at node ${r.error.node}${r.error.attempt ? `, attempt ${r.error.attempt}` : ''}` : ''));
  }

  view.append(section('explanation', 'Explanation',
    r.explanation?.text
      ? h('p', { class: 'explanation', testid: 'explanation', lang: r.explanation.lang || 'en' }, r.explanation.text)
      : h('p', { class: 'muted', testid: 'explanation' }, 'No explanation was recorded.'),
    factsList(r.explanation?.facts)));

  view.append(section('io', 'Input and output',
    h('dl', { class: 'io' },
      h('dt', {}, 'Input'), h('dd', {}, h('pre', { testid: 'request-input' }, r.input_summary || '–')),
      h('dt', {}, 'Output'), h('dd', {}, h('pre', { testid: 'request-output' }, r.output_summary || '–')))));

  if (path.nodes?.length) view.append(section('path', 'Path', pathGraph(path), edgeReasons(path)));
  const critical = body.critical_path ?? { steps: [], off_path: [] };
  view.append(section('waterfall', 'Waterfall', criticalSummary(critical), waterfall(r, spans, path, critical)));
  view.append(section('receipt', 'Receipt', receiptTable(receipt)));
  view.append(section('compare', 'Compare', compareForm(r.request_id ?? id, ctx)));
}

/** Sets this request beside another one (the diff page). */
function compareForm(id, ctx) {
  const input = h('input', { id: 'compare-id', name: 'other', required: true, class: 'mono', size: 40, testid: 'compare-input', placeholder: 'another request id' });
  return h('form', {
    class: 'compare', testid: 'compare-form',
    onsubmit: (ev) => {
      ev.preventDefault();
      const other = input.value.trim();
      if (other) ctx.navigate(`#/traces/${encodeURIComponent(id)}/diff/${encodeURIComponent(other)}`);
    },
  },
  h('label', { for: 'compare-id' }, 'Set this request beside another: '), input, ' ',
  h('button', { type: 'submit' }, 'Compare'));
}

function fact(term, ...value) {
  return h('div', {}, h('dt', {}, term), h('dd', {}, ...value));
}

function section(id, heading, ...body) {
  return h('section', { 'aria-labelledby': `${id}-h`, class: `section-${id}` }, h('h2', { id: `${id}-h` }, heading), ...body);
}

function pathGraph(path) {
  const nodes = path.nodes.map((n) => {
    const state = NODE_STATE[n.status] ?? 'plain';
    const extra = [n.label ? `label ${n.label}` : '', n.fallback ? `fell back to ${n.fallback}` : '', n.replaces ? `fallback for ${n.replaces}` : '']
      .filter(Boolean).join('; ');
    return {
      id: n.id,
      type: n.type ?? n.kind,
      sub: n.duration_us !== null && n.duration_us !== undefined ? fmtMicros(n.duration_us) : String(n.status).replace(/_/g, ' '),
      state,
      title: `${n.id} (${n.type ?? n.kind}): ${String(n.status).replace(/_/g, ' ')}${extra ? `; ${extra}` : ''}`,
    };
  });
  const edges = path.edges.map((e) => ({ ...e, state: e.taken ? 'taken' : 'skipped', title: e.why }));
  const taken = path.nodes.filter((n) => ON_PATH.has(n.status)).length;
  const skipped = path.nodes.length - taken;
  return h('div', {},
    h('p', { class: 'legend-inline' },
      h('span', { class: 'key key-taken', 'aria-hidden': 'true' }), 'taken ',
      h('span', { class: 'key key-skipped', 'aria-hidden': 'true' }), 'skipped or not run ',
      h('span', { class: 'key key-failed', 'aria-hidden': 'true' }), 'failed'),
    h('div', { class: 'graph-wrap' },
      drawGraph({
        nodes, edges, testid: 'path-graph',
        label: `Path of this request: ${taken} nodes ran, ${skipped} skipped or not run`,
      })));
}

function edgeReasons(path) {
  if (!path.edges?.length) return null;
  return h('details', { class: 'edge-reasons', testid: 'edge-reasons' },
    h('summary', {}, `Why each edge was taken or not (${path.edges.length})`),
    h('ul', {}, path.edges.map((e) => h('li', {
      class: e.taken ? 'taken' : 'skipped', testid: 'path-edge', 'data-from': e.from, 'data-to': e.to, 'data-taken': String(!!e.taken),
    },
    h('span', { class: 'mark', 'aria-label': e.taken ? 'taken' : 'not taken' }, e.taken ? '✓' : '·'), ' ',
    h('code', {}, e.from), ' → ', h('code', {}, e.to),
    e.condition ? h('span', { class: 'muted' }, ` [${e.condition}]`) : '',
    ' — ', e.why ?? ''))));
}

function factsList(facts) {
  if (!Array.isArray(facts) || !facts.length) return null;
  return h('details', { class: 'facts-list' },
    h('summary', {}, 'Facts it was written from'),
    h('ul', {}, facts.map((nf) => h('li', {}, h('code', {}, nf.node), ` (${nf.kind}): `,
      (nf.facts || []).map((f) => {
        const { fact: kind, ...rest } = f;
        return h('span', { class: 'fact' }, kind, ' ', h('span', { class: 'muted' }, JSON.stringify(rest)));
      })))));
}

/** The chain of nodes that set the latency, and the nodes that ran alongside it. */
function criticalSummary(cp) {
  const steps = cp.steps || [];
  if (!steps.length) return null;
  const off = cp.off_path || [];
  return h('p', { class: 'critical-summary', testid: 'critical-path' },
    h('span', { class: 'critical-key', 'aria-hidden': 'true' }), 'Critical path ',
    h('span', { class: 'mono' }, steps.map((s) => s.node).join(' → ')),
    ` (${fmtMicros(cp.end_us)}; the nodes' own times add up to ${fmtMicros(cp.nodes_total_us)})`,
    off.length ? h('span', { class: 'muted' }, `; ran alongside: ${off.join(', ')}`) : null);
}

/** The time axis and one row per span; path nodes that never ran get a greyed row. */
function waterfall(r, spans, path, critical) {
  const onCritical = new Set(((critical && critical.steps) || []).map((s) => s.node));
  const sorted = spans.slice().sort((a, b) => (a.start_us - b.start_us) || (a.end_us - b.end_us));
  const total = Math.max(1, Number(r.duration_us) || 0, ...sorted.map((sp) => Number(sp.end_us) || 0));
  const onPath = new Set((path.nodes || []).filter((n) => ON_PATH.has(n.status)).map((n) => n.id));
  const ticks = niceTicks(total / 1000, 5).filter((t) => t * 1000 <= total * 1.0001);

  const axis = h('div', { class: 'wf-axis', 'aria-hidden': 'true' },
    h('span', { class: 'wf-name' }, 'node'),
    h('span', { class: 'wf-track' }, ticks.map((t) => h('span', { class: 'wf-tick', style: { left: `${(t * 1000 * 100) / total}%` } }, fmtMillis(t)))),
    h('span', { class: 'num' }, 'time'), h('span', { class: 'num' }, 'cost'), h('span', {}, 'status'));

  const rows = sorted.map((sp) => {
    const dur = Math.max(0, Number(sp.end_us) - Number(sp.start_us));
    const left = (Number(sp.start_us) * 100) / total;
    const width = Math.max(0.5, (dur * 100) / total);
    const role = sp.role === 'fallback' ? ` (fallback for ${sp.replaces})` : sp.role === 'rerun' ? ` (rerun by ${sp.by})` : '';
    const name = `${sp.node}${sp.attempt > 1 ? ` #${sp.attempt}` : ''}`;
    const cls = ['wf-row', onPath.has(sp.node) ? 'on-path' : null, onCritical.has(sp.node) ? 'critical' : null, `span-${sp.status}`];
    const label = `${name}${role}: ${sp.status}, starts at ${fmtMicros(sp.start_us)}, takes ${fmtMicros(dur)}`;
    return h('details', { class: cls, testid: 'waterfall-row', 'data-node': sp.node, 'data-attempt': sp.attempt, 'data-critical': String(onCritical.has(sp.node)) },
      h('summary', { 'aria-label': label },
        h('span', { class: 'wf-name' }, h('span', { class: 'chev', 'aria-hidden': 'true' }), name, role ? h('span', { class: 'muted small' }, role) : null),
        h('span', { class: 'wf-track' },
          h('span', { class: 'wf-bar', testid: 'waterfall-bar', 'data-node': sp.node, style: { left: `${Math.min(left, 99.5)}%`, width: `${Math.min(width, 100 - Math.min(left, 99.5))}%` } })),
        h('span', { class: 'num' }, fmtMicros(dur)),
        h('span', { class: 'num' }, fmtCost(sp.cost)),
        h('span', {}, badge(sp.status))),
      spanDetails(sp));
  });

  const ran = new Set(sorted.map((sp) => sp.node));
  const idle = (path.nodes || []).filter((n) => !ran.has(n.id)).map((n) => {
    const why = (path.edges || []).filter((e) => e.to === n.id && !e.taken).map((e) => e.why).filter(Boolean);
    return h('div', { class: ['wf-row', 'wf-idle', `node-${NODE_STATE[n.status] ?? 'plain'}`], testid: 'waterfall-idle', 'data-node': n.id, 'data-status': n.status },
      h('span', { class: 'wf-name' }, h('span', { class: 'chev blank', 'aria-hidden': 'true' }), n.id),
      h('span', { class: 'wf-track wf-why' }, `${String(n.status).replace(/_/g, ' ')}${why.length ? `: ${why.join('; ')}` : ''}`),
      h('span', { class: 'num' }, '–'), h('span', { class: 'num' }, '–'), h('span', {}, badge(n.status)));
  });

  return h('div', { class: 'waterfall', testid: 'waterfall' },
    axis,
    h('div', { role: 'list', 'aria-label': `${sorted.length} attempts over ${fmtMicros(total)}` },
      [...rows, ...idle].map((row) => h('div', { role: 'listitem' }, row))));
}

function spanDetails(sp) {
  const usage = sp.usage || {};
  const tags = Object.entries(sp.tags || {});
  const u = [
    ['wall', fmtMicros(usage.wall_us)],
    usage.cpu_us !== null && usage.cpu_us !== undefined ? ['cpu', fmtMicros(usage.cpu_us)] : null,
    usage.input_tokens !== null && usage.input_tokens !== undefined ? ['input tokens', usage.input_tokens] : null,
    usage.output_tokens !== null && usage.output_tokens !== undefined ? ['output tokens', usage.output_tokens] : null,
  ].filter(Boolean);
  return h('div', { class: 'span-details', testid: 'span-details' },
    sp.error ? h('p', { class: 'error' }, `${sp.error.message} [${sp.error.code}]`) : null,
    h('dl', { class: 'io' },
      h('dt', {}, 'Input'), h('dd', {}, h('pre', { testid: 'span-input' }, sp.input_summary || '–')),
      h('dt', {}, 'Output'), h('dd', {}, h('pre', { testid: 'span-output' }, sp.output_summary || '–'))),
    h('div', { class: 'kv-grid' },
      h('table', { class: 'kv' }, h('caption', {}, 'Usage'),
        h('tbody', {}, u.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, String(v)))),
          h('tr', {}, h('th', { scope: 'row' }, 'kind'), h('td', {}, sp.kind ?? '')),
          sp.worker ? h('tr', {}, h('th', { scope: 'row' }, 'worker'), h('td', {}, sp.worker)) : null)),
      tags.length ? h('table', { class: 'kv' }, h('caption', {}, 'Tags'),
        h('tbody', {}, tags.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, String(v)))))) : null));
}

function receiptTable(receipt) {
  const lines = receipt.lines || [];
  return h('div', { class: 'table-wrap' }, h('table', { class: 'receipt', testid: 'receipt' },
    h('caption', { class: 'visually-hidden' }, `Cost receipt in ${receipt.currency}`),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Node'), h('th', { scope: 'col', class: 'num' }, 'Quantity'), h('th', { scope: 'col' }, 'Unit'),
      h('th', { scope: 'col', class: 'num' }, 'Unit price'), h('th', { scope: 'col', class: 'num' }, 'Amount'))),
    h('tbody', {}, lines.length ? lines.map((l) => h('tr', { testid: 'receipt-line', 'data-node': l.node },
      h('th', { scope: 'row' }, h('code', {}, l.node)),
      h('td', { class: 'num' }, String(l.quantity)),
      h('td', {}, String(l.unit).replace(/_/g, ' ')),
      h('td', { class: 'num' }, String(l.unit_price)),
      h('td', { class: 'num' }, String(l.amount)))) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No charges.'))),
    h('tfoot', {}, h('tr', {},
      h('th', { scope: 'row', colspan: 4 }, `Total (${receipt.currency})`),
      h('td', { class: 'num total', testid: 'receipt-total' }, String(receipt.total))))));
}
