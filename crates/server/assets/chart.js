// SVG line charts: one x category per day, one line per series (P50, P95,
// P99), axis labels, grid lines, a legend, and a <title> on every point so
// hovering or a screen reader gives the exact value.

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

/**
 * `categories`: x labels (days); `series`: [{key, name, values}] with one
 * value (or null) per category; `format`: value → text; `yLabel`, `xLabel`.
 * Returns a <figure> holding the chart and its legend.
 */
export function lineChart({ title, categories, series, format = String, yLabel, xLabel = 'Day (UTC)', testid }) {
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
      g.append(s('circle', { cx: x(i), cy: y(v), r: Math.max(2, 6 - 1.75 * k), class: 'point' },
        s('title', {}, `${sr.name} on ${categories[i]}: ${format(v)}`)));
    });
    svg.append(g);
  });

  const legend = h('ul', { class: 'legend', 'aria-label': `${title} legend` },
    series.map((sr) => h('li', { class: `series-${sr.key}`, testid: `legend-${sr.key}` },
      h('span', { class: 'swatch', 'aria-hidden': 'true' }), sr.name)));
  return h('figure', { class: 'chart-figure', testid },
    h('figcaption', {}, title), svg, legend);
}
