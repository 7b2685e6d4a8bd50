// The topologies list and one topology drawn as a graph.

import { get } from './api.js';
import { h, title, notice, listOf } from './dom.js';
import { drawGraph } from './graph.js';

const topoId = (t) => t.id ?? t.topology_id ?? t.name;

/** `{type: gpu, model: chat-7b}` → `gpu · chat-7b`; a string stays as is. */
export function resourceText(r) {
  if (!r) return '';
  if (typeof r === 'string') return r;
  const kind = r.type ?? r.kind ?? '';
  const model = r.model ?? r.model_id ?? '';
  return [kind, model].filter(Boolean).join(' · ');
}

function countOf(t, key) {
  if (Array.isArray(t[key])) return t[key].length;
  if (t.graph && Array.isArray(t.graph[key])) return t.graph[key].length;
  return t[`${key.replace(/s$/, '')}_count`] ?? t[`${key}_count`] ?? '–';
}

export async function topologiesPage(view) {
  const body = await get('/v1/topologies');
  const list = listOf(body, 'topologies');
  view.append(title('Topologies'));
  const problems = listOf(body?.problems, 'problems');
  const problemSection = problems.length
    ? h('section', { class: 'problems', 'aria-labelledby': 'problems-h', testid: 'topology-problems' },
      h('h2', { id: 'problems-h' }, 'Files with problems'),
      problems.map((p) => h('details', { class: 'problem' },
        h('summary', {}, h('code', {}, p.file),
          p.still_serving ? ` — still serving the previous version of ${p.still_serving}` : ' — not served'),
        h('pre', {}, p.message))))
    : null;
  const discovered = await discoveredSection();
  if (!list.length) {
    view.append(notice('No topologies are served. Put topology files in the directory given to `glassbox serve --topologies`.'), problemSection, discovered);
    return;
  }
  const rows = list.map((t) => {
    const id = topoId(t);
    const href = `#/topologies/${encodeURIComponent(id)}`;
    return h('tr', { testid: 'topology-row', 'data-topology': id },
      h('th', { scope: 'row' }, h('a', { href }, id)),
      h('td', {}, t.version ?? '–'),
      h('td', { class: 'num' }, String(countOf(t, 'nodes'))),
      h('td', {}, t.description ?? ''),
      h('td', {}, h('a', { href: `#/traces?topology=${encodeURIComponent(id)}`, 'aria-label': `Traces of ${id}` }, 'traces')),
    );
  });
  view.append(h('div', { class: 'table-wrap' },
    h('table', { testid: 'topology-table' },
      h('caption', { class: 'visually-hidden' }, 'Served topologies'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Topology'), h('th', { scope: 'col' }, 'Version'),
        h('th', { scope: 'col', class: 'num' }, 'Nodes'), h('th', { scope: 'col' }, 'Description'),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Links')))),
      h('tbody', {}, rows))), problemSection, discovered);
}

/**
 * Topologies known only from their stored requests (ingested over OTLP):
 * listed beside the served ones, each drawn from the paths it walked.
 */
async function discoveredSection() {
  const body = await get('/v1/discovered');
  const list = listOf(body, 'topologies');
  if (!list.length) return null;
  const rows = list.map((t) => {
    const id = t.topology_id;
    const q = encodeURIComponent(id);
    return h('tr', { testid: 'discovered-row', 'data-topology': id },
      h('th', { scope: 'row' }, h('a', { href: `#/discovered/${q}` }, id)),
      h('td', {}, (t.versions || []).join(', ') || '–'),
      h('td', { class: 'num' }, String(t.requests)),
      h('td', { class: 'num' }, `${Number(t.latency_p95_ms).toFixed(1)} ms`),
      h('td', {},
        h('a', { href: `#/traces?topology=${q}`, 'aria-label': `Traces of ${id}` }, 'traces'), ' · ',
        h('a', { href: `#/reports?topology=${q}`, 'aria-label': `Cost and latency of ${id}` }, 'reports')),
    );
  });
  return h('section', { 'aria-labelledby': 'discovered-h', testid: 'discovered' },
    h('h2', { id: 'discovered-h' }, 'Discovered topologies'),
    h('p', { class: 'muted' }, 'Pipelines Glassbox does not run, from the traces they export over OTLP (POST /v1/traces).'),
    h('div', { class: 'table-wrap' },
      h('table', { testid: 'discovered-table' },
        h('caption', { class: 'visually-hidden' }, 'Discovered topologies'),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Topology'), h('th', { scope: 'col' }, 'Versions'),
          h('th', { scope: 'col', class: 'num' }, 'Requests'), h('th', { scope: 'col', class: 'num' }, 'P95 latency'),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Links')))),
        h('tbody', {}, rows))));
}

/** One discovered topology: the nodes and edges its requests walked. */
export async function discoveredPage(view, id) {
  const d = await get(`/v1/discovered/graph?topology=${encodeURIComponent(id)}`);
  const q = encodeURIComponent(id);
  const nodes = listOf(d.nodes, 'nodes');
  const edges = listOf(d.edges, 'edges');
  view.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, 'Topologies'), ' / '),
    title(id, h('span', { class: 'version' }, `@${(d.versions || []).join(', ')}`)),
    h('p', { class: 'lead' }, `Discovered from ${d.requests} stored requests: each step seen, and how many requests ran it.`),
    h('p', {}, h('a', { href: `#/traces?topology=${q}` }, 'Traces of this topology'),
      ' · ', h('a', { href: `#/reports?topology=${q}` }, 'Cost and latency')),
  );
  const gnodes = nodes.map((n) => {
    const models = (n.models || []).join(', ');
    return {
      id: n.id,
      type: n.type,
      sub: `${n.requests} of ${d.requests} requests${models ? ` · ${models}` : ''}`,
      title: `${n.id}: ${n.type}, in ${n.requests} of ${d.requests} requests${models ? `, ${models}` : ''}`,
    };
  });
  const gedges = edges.map((e) => ({
    from: e.from, to: e.to, condition: e.why === 'parent span' ? null : (e.why === 'ran after' ? 'then' : e.why),
  }));
  view.append(h('section', { 'aria-labelledby': 'graph-h' },
    h('h2', { id: 'graph-h' }, 'Graph'),
    h('div', { class: 'graph-wrap' },
      drawGraph({ nodes: gnodes, edges: gedges, label: `Graph of ${id}: ${nodes.length} nodes, ${edges.length} edges`, testid: 'topology-graph' }))));
  view.append(h('section', { 'aria-labelledby': 'nodes-h' },
    h('h2', { id: 'nodes-h' }, 'Nodes'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'node-table' },
      h('thead', {}, h('tr', {}, ['Node', 'Type', 'Requests', 'Spans', 'Models'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, nodes.map((n) => h('tr', {},
        h('th', { scope: 'row' }, h('code', {}, n.id)),
        h('td', {}, n.type),
        h('td', { class: 'num' }, String(n.requests)),
        h('td', { class: 'num' }, String(n.spans)),
        h('td', {}, (n.models || []).join(', ') || '–'))))))));
}

export async function topologyPage(view, id) {
  const body = await get(`/v1/topologies/${encodeURIComponent(id)}`);
  const t = body.topology ?? body;
  const graph = t.graph ?? body.graph ?? t;
  const nodes = listOf(graph.nodes, 'nodes');
  const edges = listOf(graph.edges, 'edges');
  const version = t.version ?? body.version;
  view.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, 'Topologies'), ' / '),
    title(topoId(t) ?? id, version ? h('span', { class: 'version' }, `@${version}`) : null),
  );
  if (t.description) view.append(h('p', { class: 'lead' }, t.description));
  if (t.reload_error) {
    view.append(h('div', { class: 'error', role: 'alert', testid: 'reload-error' },
      h('p', {}, 'The latest edit of this file was rejected; the version shown is still served.'),
      h('pre', {}, t.reload_error)));
  }
  view.append(h('p', {}, h('a', { href: `#/traces?topology=${encodeURIComponent(id)}` }, 'Traces of this topology'),
    ' · ', h('a', { href: `#/reports?topology=${encodeURIComponent(id)}` }, 'Cost and latency')));

  // The graph's resource tags carry kind and model; prices are in the spec.
  const specNodes = new Map(listOf(t.spec?.nodes, 'nodes').map((n) => [n.id, n]));
  const priced = (n) => ({ ...(specNodes.get(n.id)?.resource || {}), ...(typeof n.resource === 'object' ? n.resource : {}) });
  const gnodes = nodes.map((n) => {
    const type = n.type ?? n.kind ?? '';
    const res = resourceText(n.resource);
    return {
      id: n.id,
      type,
      sub: res,
      title: `${n.id}: ${type}${res ? ` on ${res}` : ''}${n.description ? ` — ${n.description}` : ''}`,
    };
  });
  const gedges = edges.map((e) => ({
    from: e.from, to: e.to, condition: e.condition ?? e.when ?? null, max_iterations: e.max_iterations ?? null,
  }));
  view.append(h('section', { 'aria-labelledby': 'graph-h' },
    h('h2', { id: 'graph-h' }, 'Graph'),
    h('div', { class: 'graph-wrap' },
      drawGraph({ nodes: gnodes, edges: gedges, label: `Graph of ${id}: ${nodes.length} nodes, ${edges.length} edges`, testid: 'topology-graph' }))));

  view.append(h('section', { 'aria-labelledby': 'nodes-h' },
    h('h2', { id: 'nodes-h' }, 'Nodes'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'node-table' },
      h('thead', {}, h('tr', {}, ['Node', 'Type', 'Resource', 'Fallback', 'Description'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, nodes.map((n) => h('tr', {},
        h('th', { scope: 'row' }, h('code', {}, n.id)),
        h('td', {}, n.type ?? n.kind ?? ''),
        h('td', {}, resourceText(n.resource) || '–', resourceExtra(priced(n))),
        h('td', {}, n.fallback ? h('code', {}, n.fallback) : '–'),
        h('td', {}, n.description ?? ''))))))));
  if (edges.length) {
    view.append(h('section', { 'aria-labelledby': 'edges-h' },
      h('h2', { id: 'edges-h' }, 'Edges'),
      h('ul', { class: 'edge-list' }, edges.map((e) => h('li', {},
        h('code', {}, e.from), ' → ', h('code', {}, e.to),
        e.condition ? h('span', { class: 'muted' }, ` when ${e.condition}`) : '',
        e.max_iterations ? h('span', { class: 'muted' }, ` (back edge: the loop runs at most ${e.max_iterations} times)`) : '')))));
  }
}

function resourceExtra(r) {
  if (!r || typeof r !== 'object') return null;
  const bits = [];
  if (r.cost_per_call !== undefined) bits.push(`${r.cost_per_call} per call`);
  if (r.cost_per_cpu_ms !== undefined) bits.push(`${r.cost_per_cpu_ms} per CPU-ms`);
  if (r.cost_per_1k_tokens !== undefined) bits.push(`${r.cost_per_1k_tokens} per 1k tokens`);
  if (r.cost_per_1k_input_tokens !== undefined) bits.push(`${r.cost_per_1k_input_tokens} per 1k in`);
  if (r.cost_per_1k_output_tokens !== undefined) bits.push(`${r.cost_per_1k_output_tokens} per 1k out`);
  return bits.length ? h('span', { class: 'muted small' }, ` (${bits.join(', ')})`) : null;
}
