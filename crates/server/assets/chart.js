// SVG charts: line charts (one x category per time bucket, one line per
// series: P50, P95, P99) and stacked bars of shares (the path mix per
// bucket), with axis labels, grid lines, a legend, and a <title> on every
// point or segment so hovering or a screen reader gives the exact value.
// With `href`, every point and segment is a link (to the traces behind it).

import { h, s } from './dom.js';

const W = 640;
const H = 280;
const M = { top: 16, right: 40, bottom: 48, left: 88 };

/** 1, 2 or 5 × 10^k steps covering [0, max] in about `count` ticks. */
export function niceTicks(max, count = 5) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw) || 10 * mag;
  const ticks = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  if (ticks[ticks.length - 1] < max) ticks.push(+(ticks[ticks.length - 1] + step).toPrecision(12));
  return ticks;
}

/** Wraps an SVG mark in a link when `url` is set. */
function linked(mark, url, label) {
  if (!url) return mark;
  return s('a', { href: url, class: 'point-link', 'aria-label': label, testid: 'point-link' }, mark);
}

/**
 * `categories`: x labels (time buckets); `series`: [{key, name, values}]
 * with one value (or null) per category; `format`: value → text; `yLabel`,
 * `xLabel`; `href(i)`: where a click on category `i`'s points leads.
 * Returns a <figure> holding the chart and its legend.
 */
export function lineChart({ title, categories, series, format = String, yLabel, xLabel = 'Day (UTC)', testid, href }) {
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const all = series.flatMap((sr) => sr.values).filter((v) => v !== null && Number.isFinite(v));
  const ticks = niceTicks(Math.max(0, ...all));
  const top = ticks[ticks.length - 1] || 1;
  const n = categories.length;
  const x = (i) => M.left + (n <= 1 ? iw / 2 : (i * iw) / (n - 1));
  const y = (v) => M.top + ih - (v / top) * ih;

  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': `${title}: ${series.map((sr) => sr.name).join(', ')} by day`,
    preserveAspectRatio: 'xMidYMid meet',
  });
  svg.append(s('title', {}, title));

  const grid = s('g', { class: 'grid' });
  for (const t of ticks) {
    grid.append(
      s('line', { x1: M.left, x2: M.left + iw, y1: y(t), y2: y(t) }),
      s('text', { x: M.left - 8, y: y(t) + 4, 'text-anchor': 'end', class: 'tick' }, format(t)),
    );
  }
  const every = Math.max(1, Math.ceil(n / 8));
  categories.forEach((c, i) => {
    if (i % every !== 0 && i !== n - 1) return;
    grid.append(
      s('line', { x1: x(i), x2: x(i), y1: M.top + ih, y2: M.top + ih + 5, class: 'tick-mark' }),
      s('text', { x: x(i), y: M.top + ih + 20, 'text-anchor': 'middle', class: 'tick' }, c),
    );
  });
  grid.append(
    s('line', { x1: M.left, x2: M.left + iw, y1: M.top + ih, y2: M.top + ih, class: 'axis' }),
    s('line', { x1: M.left, x2: M.left, y1: M.top, y2: M.top + ih, class: 'axis' }),
    s('text', { x: M.left + iw / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis-label' }, xLabel),
    s('text', {
      x: 0, y: 0, transform: `translate(14 ${M.top + ih / 2}) rotate(-90)`,
      'text-anchor': 'middle', class: 'axis-label',
    }, yLabel),
  );
  svg.append(grid);

  // Later series get smaller points, so equal values show as concentric
  // rings instead of hiding each other.
  series.forEach((sr, k) => {
    const g = s('g', { class: ['series', `series-${sr.key}`], testid: `series-${sr.key}`, 'data-series': sr.name });
    // Break the line where a day has no value.
    let d = '';
    let pen = false;
    sr.values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(i)},${y(v)} `;
      pen = true;
    });
    if (d) g.append(s('path', { d: d.trim(), class: 'line' }));
    sr.values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) return;
      const label = `${sr.name} at ${categories[i]}: ${format(v)}`;
      g.append(linked(s('circle', { cx: x(i), cy: y(v), r: Math.max(2, 6 - 1.75 * k), class: 'point' },
        s('title', {}, label)), href?.(i), `${label}; show these traces`));
    });
    svg.append(g);
  });

  const legend = h('ul', { class: 'legend', 'aria-label': `${title} legend` },
    series.map((sr) => h('li', { class: `series-${sr.key}`, testid: `legend-${sr.key}` },
      h('span', { class: 'swatch', 'aria-hidden': 'true' }), sr.name)));
  return h('figure', { class: 'chart-figure', testid },
    h('figcaption', {}, title), svg, legend);
}

/**
 * Stacked bars, one per category, of shares that add up to 1 (the path
 * mix per bucket): `stacks[i]` is [{key, share, count}]; `keys` orders the
 * segments and the legend; `href(i, key)` links a segment.
 */
export function shareChart({ title, categories, stacks, keys, yLabel = 'Share of requests', xLabel, testid, href }) {
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const n = categories.length;
  const band = iw / Math.max(1, n);
  const bw = Math.max(2, Math.min(48, band * 0.7));
  const y = (v) => M.top + ih - v * ih;
  const svg = s('svg', {
    class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, preserveAspectRatio: 'xMidYMid meet',
  });
  svg.append(s('title', {}, title));
  const grid = s('g', { class: 'grid' });
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    grid.append(
      s('line', { x1: M.left, x2: M.left + iw, y1: y(t), y2: y(t) }),
      s('text', { x: M.left - 8, y: y(t) + 4, 'text-anchor': 'end', class: 'tick' }, `${Math.round(t * 100)}%`),
    );
  }
  const every = Math.max(1, Math.ceil(n / 8));
  categories.forEach((c, i) => {
    if (i % every !== 0 && i !== n - 1) return;
    grid.append(s('text', { x: M.left + band * (i + 0.5), y: M.top + ih + 20, 'text-anchor': 'middle', class: 'tick' }, c));
  });
  grid.append(
    s('line', { x1: M.left, x2: M.left + iw, y1: M.top + ih, y2: M.top + ih, class: 'axis' }),
    s('text', { x: M.left + iw / 2, y: H - 8, 'text-anchor': 'middle', class: 'axis-label' }, xLabel),
    s('text', {
      x: 0, y: 0, transform: `translate(14 ${M.top + ih / 2}) rotate(-90)`, 'text-anchor': 'middle', class: 'axis-label',
    }, yLabel),
  );
  svg.append(grid);
  stacks.forEach((stack, i) => {
    const g = s('g', { class: 'stack', testid: 'share-stack', 'data-category': categories[i] });
    let base = 0;
    for (const key of keys) {
      const part = stack.find((p) => p.key === key);
      if (!part || !(part.share > 0)) continue;
      const label = `${key} at ${categories[i]}: ${(100 * part.share).toFixed(1)}% (${part.count})`;
      const rect = s('rect', {
        x: M.left + band * (i + 0.5) - bw / 2, y: y(base + part.share), width: bw, height: part.share * ih,
        class: ['segment', `segment-${keys.indexOf(key) % 8}`], testid: 'share-segment', 'data-key': key,
      }, s('title', {}, label));
      g.append(linked(rect, href?.(i, key), `${label}; show these traces`));
      base += part.share;
    }
    svg.append(g);
  });
  const legend = h('ul', { class: 'legend', 'aria-label': `${title} legend` },
    keys.map((k, j) => h('li', { class: `segment-${j % 8}`, testid: 'share-legend' },
      h('span', { class: 'swatch', 'aria-hidden': 'true' }), k)));
  return h('figure', { class: 'chart-figure', testid }, h('figcaption', {}, title), svg, legend);
}
