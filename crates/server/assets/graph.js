// Draws a topology (or one request's path through it) as an SVG DAG.
//
// Layout, in the Sugiyama tradition but small:
//  1. layers by longest path from the entries (a node sits one layer below its
//     deepest predecessor), so every edge points down;
//  2. edges spanning several layers get invisible waypoints, one per layer;
//  3. within a layer, nodes are ordered by the barycentre of their neighbours,
//     sweeping down and up a few times and keeping the order with the fewest
//     crossings;
//  4. each layer is centred horizontally; edges are drawn as smooth curves
//     through their waypoints, with the condition as a label.
// A loop's back edge (from a node up to one on an earlier or the same layer)
// takes no part in the layering: it is drawn apart, leaving the source's right
// side and curving up the right of the graph into the target's right side,
// labelled with its bound when the payload gives one (`max_iterations`).

import { s } from './dom.js';

const NODE_W = 184;
const NODE_H = 70;
const GAP_X = 36;
const GAP_Y = 78;
const WAYPOINT_W = 18;
const LABEL_W = 120;
const PAD = 16;
/** Room right of the nodes for each back edge's curve. */
const BACK_GAP = 40;

/**
 * Computes positions. `nodes`: [{id}], `edges`: [{from, to}].
 * Returns {nodes: Map id → {x, y, layer}, edges: [{edge, points}], width, height}.
 */
export function layout(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const good = edges.filter((e) => known.has(e.from) && known.has(e.to) && e.from !== e.to);
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of good) {
    preds.get(e.to).push(e.from);
    succs.get(e.from).push(e.to);
  }

  // 1. Longest-path layering over a topological order (Kahn); nodes left
  // over sit on a cycle and are appended in their given order.
  const indeg = new Map(ids.map((id) => [id, preds.get(id).length]));
  const order = [];
  const queue = ids.filter((id) => indeg.get(id) === 0);
  while (queue.length) {
    const id = queue.shift();
    order.push(id);
    for (const t of succs.get(id)) {
      indeg.set(t, indeg.get(t) - 1);
      if (indeg.get(t) === 0) queue.push(t);
    }
  }
  for (const id of ids) if (!order.includes(id)) order.push(id);
  const rank = new Map(order.map((id, i) => [id, i]));
  const layer = new Map();
  for (const id of order) {
    let l = 0;
    for (const p of preds.get(id)) {
      if (rank.get(p) < rank.get(id) && layer.has(p)) l = Math.max(l, layer.get(p) + 1);
    }
    layer.set(id, l);
  }
  const forward = good.filter((e) => layer.get(e.from) < layer.get(e.to));
  const backward = good.filter((e) => layer.get(e.from) >= layer.get(e.to));
  const depth = Math.max(0, ...layer.values()) + 1;

  // 2. Waypoints for long edges: chains of virtual vertices.
  const layers = Array.from({ length: depth }, () => []);
  for (const id of order) layers[layer.get(id)].push({ id, real: true });
  const chains = forward.map((e, i) => {
    const chain = [e.from];
    for (let l = layer.get(e.from) + 1; l < layer.get(e.to); l++) {
      const v = `\u0000${i}:${l}`;
      layers[l].push({ id: v, real: false, wide: !!e.condition });
      chain.push(v);
    }
    chain.push(e.to);
    return chain;
  });
  const up = new Map();
  const down = new Map();
  for (const row of layers) for (const v of row) {
    up.set(v.id, []);
    down.set(v.id, []);
  }
  for (const chain of chains) {
    for (let i = 0; i + 1 < chain.length; i++) {
      down.get(chain[i]).push(chain[i + 1]);
      up.get(chain[i + 1]).push(chain[i]);
    }
  }

  // 3. Barycentre ordering, best of a few sweeps.
  const pos = new Map();
  const index = () => layers.forEach((row) => row.forEach((v, i) => pos.set(v.id, i)));
  index();
  const crossings = () => {
    let c = 0;
    for (let l = 0; l + 1 < layers.length; l++) {
      const segs = [];
      for (const v of layers[l]) for (const t of down.get(v.id)) segs.push([pos.get(v.id), pos.get(t)]);
      for (let i = 0; i < segs.length; i++) {
        for (let j = i + 1; j < segs.length; j++) {
          const [a1, b1] = segs[i];
          const [a2, b2] = segs[j];
          if ((a1 - a2) * (b1 - b2) < 0) c++;
        }
      }
    }
    return c;
  };
  const sortBy = (row, nbrs) => {
    const key = new Map(
      row.map((v, i) => {
        const ns = nbrs.get(v.id);
        return [v.id, ns.length ? ns.reduce((a, n) => a + pos.get(n), 0) / ns.length : i];
      }),
    );
    row.sort((a, b) => key.get(a.id) - key.get(b.id) || pos.get(a.id) - pos.get(b.id));
  };
  let best = layers.map((row) => row.slice());
  let bestCount = crossings();
  for (let iter = 0; iter < 8 && bestCount > 0; iter++) {
    if (iter % 2 === 0) for (let l = 1; l < layers.length; l++) { sortBy(layers[l], up); index(); }
    else for (let l = layers.length - 2; l >= 0; l--) { sortBy(layers[l], down); index(); }
    const c = crossings();
    if (c < bestCount) {
      bestCount = c;
      best = layers.map((row) => row.slice());
    }
  }
  best.forEach((row, l) => { layers[l] = row; });

  // 4. Coordinates: each layer centred.
  const widthOf = (v) => (v.real ? NODE_W : v.wide ? LABEL_W : WAYPOINT_W);
  const rowWidth = (row) => row.reduce((a, v) => a + widthOf(v), 0) + GAP_X * Math.max(0, row.length - 1);
  const inner = Math.max(NODE_W, ...layers.map(rowWidth)) + 2 * PAD;
  const width = inner + (backward.length ? BACK_GAP * backward.length + 24 : 0);
  const centre = new Map();
  layers.forEach((row, l) => {
    let x = (inner - rowWidth(row)) / 2;
    const y = PAD + l * (NODE_H + GAP_Y);
    for (const v of row) {
      centre.set(v.id, { x: x + widthOf(v) / 2, y, layer: l });
      x += widthOf(v) + GAP_X;
    }
  });
  const placed = new Map();
  for (const id of ids) {
    const c = centre.get(id);
    placed.set(id, { x: c.x - NODE_W / 2, y: c.y, layer: c.layer });
  }
  const routed = forward.map((edge, i) => {
    const chain = chains[i];
    const points = chain.map((id, k) => {
      const c = centre.get(id);
      if (k === 0) return { x: c.x, y: c.y + NODE_H };
      if (k === chain.length - 1) return { x: c.x, y: c.y };
      return { x: c.x, y: c.y + NODE_H / 2 };
    });
    return { edge, points };
  });
  // Back edges: right side of the source, out past every node they pass,
  // up, and into the right side of the target; each further out than the last.
  const back = backward.map((edge, i) => {
    const a = placed.get(edge.from);
    const b = placed.get(edge.to);
    const top = Math.min(a.layer, b.layer);
    const bottom = Math.max(a.layer, b.layer);
    let right = Math.max(a.x, b.x) + NODE_W;
    for (let l = top; l <= bottom; l++) {
      for (const v of layers[l]) right = Math.max(right, centre.get(v.id).x + widthOf(v) / 2);
    }
    const out = Math.min(width - 28, right + BACK_GAP * (i + 1));
    const points = [
      { x: a.x + NODE_W, y: a.y + NODE_H / 2 },
      { x: out, y: a.y + NODE_H / 2 },
      { x: out, y: b.y + NODE_H / 2 },
      { x: b.x + NODE_W, y: b.y + NODE_H / 2 },
    ];
    return { edge, points };
  });
  const height = PAD * 2 + depth * NODE_H + (depth - 1) * GAP_Y;
  return { nodes: placed, edges: routed, back, width, height, crossings: bestCount };
}

/** A back edge's path: out to the right, up, and back in, corners rounded. */
function loopCurve([a, b, c, d]) {
  const r = Math.min(14, Math.abs(b.y - c.y) / 2, (b.x - a.x) / 2);
  const up = c.y < b.y ? -1 : 1;
  return `M${a.x},${a.y} H${b.x - r} Q${b.x},${b.y} ${b.x},${b.y + up * r}`
    + ` V${c.y - up * r} Q${c.x},${c.y} ${c.x - r},${c.y} H${d.x}`;
}

/** A smooth path through the points (vertical cubic segments). */
function curve(points) {
  let d = `M${points[0].x},${points[0].y}`;
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1];
    const b = points[i];
    const my = (a.y + b.y) / 2;
    d += ` C${a.x},${my} ${b.x},${my} ${b.x},${b.y}`;
  }
  return d;
}

function clip(text, max) {
  const t = String(text ?? '');
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

let graphCount = 0;

/**
 * Renders the graph. `nodes`: [{id, type, sub, state, title, href}];
 * `edges`: [{from, to, condition, state, title}]. `state` becomes a class
 * (`taken`, `skipped`, `failed`, ...) for the path view. Returns an <svg>.
 */
export function drawGraph({ nodes, edges, label, testid = 'graph' }) {
  const g = layout(nodes, edges);
  const uid = `gb${++graphCount}`;
  const svg = s('svg', {
    class: 'graph',
    viewBox: `0 0 ${g.width} ${g.height}`,
    width: g.width,
    height: g.height,
    role: 'group',
    'aria-label': label,
    testid,
  });
  // One arrowhead per edge state, sized in user units so thick (taken)
  // edges do not get oversized heads.
  svg.append(
    s('defs', {},
      ['plain', 'taken', 'skipped'].map((st) => s('marker', {
        id: `${uid}-arrow-${st}`, viewBox: '0 0 10 10', refX: 9, refY: 5,
        markerWidth: 10, markerHeight: 10, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse',
      }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: `arrowhead arrowhead-${st}` })))),
  );
  const edgeLayer = s('g', { class: 'edges' });
  const labelLayer = s('g', { class: 'edge-labels' });
  for (const { edge, points } of g.edges) {
    const state = edge.state || 'plain';
    const path = s('path', {
      d: curve(points),
      class: ['edge', `edge-${state}`],
      'marker-end': `url(#${uid}-arrow-${state === 'taken' || state === 'skipped' ? state : 'plain'})`,
      testid: 'graph-edge',
      'data-from': edge.from,
      'data-to': edge.to,
      'data-state': state,
    });
    const desc = `${edge.from} to ${edge.to}${edge.condition ? ` when ${edge.condition}` : ''}${edge.title ? `: ${edge.title}` : ''}`;
    path.append(s('title', {}, desc));
    edgeLayer.append(path);
    if (edge.condition) {
      // A long edge carries its label at its first waypoint (which was
      // given room for it); a short one just above its target.
      const b = points[1];
      const x = b.x;
      const y = points.length > 2 ? b.y : b.y - GAP_Y * 0.4;
      const text = clip(edge.condition, 18);
      const w = text.length * 6.6 + 10;
      labelLayer.append(
        s('g', { class: ['edge-label', `edge-${state}`], testid: 'graph-edge-label' },
          s('rect', { x: x - w / 2, y: y - 9, width: w, height: 18, rx: 4 }),
          s('text', { x, y: y + 4, 'text-anchor': 'middle' }, text),
          s('title', {}, desc),
        ),
      );
    }
  }
  for (const { edge, points } of g.back) {
    const state = edge.state || 'plain';
    const bound = edge.max_iterations ? `at most ${edge.max_iterations} times` : '';
    const desc = `${edge.from} back to ${edge.to} (a loop${bound ? `, ${bound}` : ''})`
      + `${edge.condition ? ` when ${edge.condition}` : ''}${edge.title ? `: ${edge.title}` : ''}`;
    const path = s('path', {
      d: loopCurve(points),
      class: ['edge', 'edge-back', `edge-${state}`],
      'marker-end': `url(#${uid}-arrow-${state === 'taken' || state === 'skipped' ? state : 'plain'})`,
      testid: 'graph-edge',
      'data-from': edge.from,
      'data-to': edge.to,
      'data-state': state,
      'data-back': 'true',
    });
    path.append(s('title', {}, desc));
    edgeLayer.append(path);
    // The label is short (the bound); the condition is in the tooltip.
    const text = edge.max_iterations ? `≤ ${edge.max_iterations}×` : 'loop';
    const w = text.length * 6.6 + 10;
    const x = points[1].x;
    const y = (points[1].y + points[2].y) / 2;
    labelLayer.append(
      s('g', { class: ['edge-label', 'edge-back', `edge-${state}`], testid: 'graph-edge-label' },
        s('rect', { x: x - w / 2, y: y - 9, width: w, height: 18, rx: 4 }),
        s('text', { x, y: y + 4, 'text-anchor': 'middle' }, text),
        s('title', {}, desc),
      ),
    );
  }
  const nodeLayer = s('g', { class: 'nodes' });
  for (const n of nodes) {
    const p = g.nodes.get(n.id);
    const state = n.state || 'plain';
    const box = s('g', {
      class: ['node', `node-${state}`],
      transform: `translate(${p.x},${p.y})`,
      testid: 'graph-node',
      'data-node': n.id,
      'data-state': state,
    },
    s('title', {}, n.title || `${n.id} (${n.type})`),
    s('rect', { width: NODE_W, height: NODE_H, rx: 8 }),
    s('text', { x: 12, y: 22, class: 'node-id' }, clip(n.id, 20)),
    s('text', { x: 12, y: 42, class: 'node-sub' }, clip(n.type, 26)),
    n.sub ? s('text', { x: 12, y: 60, class: 'node-sub' }, clip(n.sub, 26)) : null,
    );
    if (n.href) {
      const a = s('a', { href: n.href, 'aria-label': n.title || n.id });
      a.append(box);
      nodeLayer.append(a);
    } else {
      box.setAttribute('tabindex', '0');
      box.setAttribute('role', 'img');
      box.setAttribute('aria-label', n.title || `${n.id}, ${n.type}`);
      nodeLayer.append(box);
    }
  }
  svg.append(edgeLayer, labelLayer, nodeLayer);
  return svg;
}
