// Two requests side by side (GET /v1/traces/{a}/diff/{b}): the first
// divergence in plain words (English or 中文), both requests' headers, every
// node with its status, label, guard, time, tokens and cost on each side
// (rows that differ marked), every edge with each side's reason, and the
// input/output summaries of the nodes that differ.

import { get } from './api.js';
import { h, title, fmtMicros, fmtCost, badge } from './dom.js';

export async function diffPage(view, [a, b], ctx) {
  const lang = ctx.query.get('lang') === 'zh' ? 'zh' : 'en';
  const body = await get(`/v1/traces/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`, { lang });
  const d = body.diff;
  const here = `#/traces/${encodeURIComponent(a)}/diff/${encodeURIComponent(b)}`;

  view.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/traces' }, 'Traces'), ' / '),
    title('Compare requests'),
    h('dl', { class: 'facts', testid: 'diff-header' },
      side('A', d.a), side('B', d.b)),
    section('divergence', 'First divergence',
      h('p', { class: 'langs' },
        lang === 'en' ? h('strong', {}, 'English') : h('a', { href: `${here}?lang=en`, testid: 'diff-lang-en' }, 'English'), ' · ',
        lang === 'zh' ? h('strong', {}, '中文') : h('a', { href: `${here}?lang=zh`, testid: 'diff-lang-zh' }, '中文')),
      h('p', { class: 'explanation', testid: 'diff-explanation', lang, 'data-kind': d.first_divergence?.kind ?? 'none' }, body.explanation)),
    section('diff-nodes', 'Nodes', nodesTable(d)),
    section('diff-edges', 'Edges', edgesTable(d)),
    section('diff-data', 'Node inputs and outputs', nodeData(d)),
  );
}

function side(name, r) {
  return h('div', {},
    h('dt', {}, name),
    h('dd', {},
      h('a', { href: `#/traces/${encodeURIComponent(r.request_id)}`, class: 'mono' }, r.request_id), ' ',
      `${r.topology_id}@${r.version} `, badge(r.status), ' ',
      fmtMicros(r.duration_us), ' · ', fmtCost(r.cost, r.currency)));
}

function section(id, heading, ...body) {
  return h('section', { 'aria-labelledby': `${id}-h`, class: `section-${id}` }, h('h2', { id: `${id}-h` }, heading), ...body);
}

function state(s) {
  if (!s) return h('span', { class: 'muted' }, 'absent');
  return h('span', {}, badge(s.status),
    s.label ? h('code', {}, ` ${s.label}`) : null,
    s.guard ? h('span', { class: 'muted' }, ` guard ${s.guard.replace(/_/g, ' ')}`) : null,
    s.attempts > 1 ? h('span', { class: 'muted' }, ` ×${s.attempts}`) : null);
}

function tokens(s) {
  if (!s || (s.input_tokens == null && s.output_tokens == null)) return '–';
  return `${s.input_tokens ?? '–'} / ${s.output_tokens ?? '–'}`;
}

function nodesTable(d) {
  const col = (text, num) => h('th', { scope: 'col', class: num ? 'num' : null }, text);
  return h('div', { class: 'table-wrap' }, h('table', { class: 'receipt', testid: 'diff-nodes' },
    h('caption', { class: 'visually-hidden' }, 'Each node in request A and request B'),
    h('thead', {}, h('tr', {}, col('Node'), col('A'), col('B'), col('A time', 1), col('B time', 1),
      col('A tokens in/out', 1), col('B tokens in/out', 1), col('A cost', 1), col('B cost', 1))),
    h('tbody', {}, d.nodes.map((r) => h('tr', { testid: 'diff-node', 'data-node': r.node, 'data-differs': String(r.differs), class: r.differs ? 'differs' : null },
      h('th', { scope: 'row' }, r.differs ? h('span', { 'aria-label': 'differs' }, '≠ ') : null, h('code', {}, r.node), h('span', { class: 'muted small' }, ` ${r.type}`)),
      h('td', {}, state(r.a)), h('td', {}, state(r.b)),
      h('td', { class: 'num' }, fmtMicros(r.a?.duration_us)), h('td', { class: 'num' }, fmtMicros(r.b?.duration_us)),
      h('td', { class: 'num' }, tokens(r.a)), h('td', { class: 'num' }, tokens(r.b)),
      h('td', { class: 'num' }, r.a ? fmtCost(r.a.cost) : '–'), h('td', { class: 'num' }, r.b ? fmtCost(r.b.cost) : '–'))))));
}

function edgeSide(e) {
  if (!e) return h('span', { class: 'muted' }, 'absent');
  return h('span', { class: e.taken ? 'taken' : 'skipped' }, e.taken ? '✓ ' : '· ', e.why);
}

function edgesTable(d) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'receipt', testid: 'diff-edges' },
    h('caption', { class: 'visually-hidden' }, 'Each edge in request A and request B, and why it was taken or not'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Edge'), h('th', { scope: 'col' }, 'A'), h('th', { scope: 'col' }, 'B'))),
    h('tbody', {}, d.edges.map((e) => h('tr', { testid: 'diff-edge', 'data-from': e.from, 'data-to': e.to, 'data-differs': String(e.differs), class: e.differs ? 'differs' : null },
      h('th', { scope: 'row' }, e.differs ? h('span', { 'aria-label': 'differs' }, '≠ ') : null, h('code', {}, e.from), ' → ', h('code', {}, e.to)),
      h('td', {}, edgeSide(e.a)), h('td', {}, edgeSide(e.b)))))));
}

function nodeData(d) {
  const changed = d.nodes.filter((r) => r.differs);
  if (!changed.length) return h('p', { class: 'muted' }, 'Every node had the same input and output.');
  const io = (label, s) => [
    h('dt', {}, `${label} input`), h('dd', {}, h('pre', {}, s?.input_summary ?? '–')),
    h('dt', {}, `${label} output`), h('dd', {}, h('pre', {}, s?.output_summary ?? (s?.error ? `${s.error.message} [${s.error.code}]` : '–'))),
  ];
  return h('div', {}, changed.map((r) => h('details', { testid: 'diff-node-data', 'data-node': r.node },
    h('summary', {}, h('code', {}, r.node)),
    h('dl', { class: 'io' }, ...io('A', r.a), ...io('B', r.b)))));
}
