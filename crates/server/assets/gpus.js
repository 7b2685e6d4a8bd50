// GPUs: every worker's GPUs as last read (utilisation, memory, temperature,
// power) and the GPU alerts firing, from `/v1/gpus`. On a machine without
// an NVIDIA driver the panel says there are no GPUs, and why.

import { get } from './api.js';
import { h, title, listOf, fmtTime } from './dom.js';

const GIB = 1024 ** 3;

function pct(ratio) {
  return ratio === null || ratio === undefined ? '–' : `${(100 * Number(ratio)).toFixed(0)}%`;
}

function memory(g) {
  const used = g.memory_used_bytes;
  const total = g.memory_total_bytes;
  if (used === null || used === undefined || !total) return '–';
  return `${(used / GIB).toFixed(1)} / ${(total / GIB).toFixed(1)} GiB (${pct(used / total)})`;
}

function power(g) {
  if (g.power_watts === null || g.power_watts === undefined) return '–';
  const limit = g.power_limit_watts ? ` / ${Number(g.power_limit_watts).toFixed(0)}` : '';
  return `${Number(g.power_watts).toFixed(0)}${limit} W`;
}

function temperature(g) {
  return g.temperature_celsius === null || g.temperature_celsius === undefined
    ? '–' : `${Number(g.temperature_celsius).toFixed(0)} °C`;
}

/** The GPU panel: a row per GPU with its readings and the alerts it raises. */
export function gpuPanel(snap) {
  const gpus = listOf(snap, 'gpus');
  const alerts = listOf(snap, 'alerts');
  if (!gpus.length) {
    return h('section', { class: 'report-panel', testid: 'gpu-panel', 'data-gpus': '0' },
      h('p', { testid: 'gpus-none' }, 'No GPUs on this machine.'),
      snap.unavailable ? h('p', { class: 'muted small' }, snap.unavailable) : null,
      snap.settings && snap.settings.enabled === false
        ? h('p', { class: 'muted small' }, 'GPU sampling is turned off (`[alerts.gpu] enabled = false`).') : null);
  }
  const firingOn = (g) => alerts.filter((a) => a.worker === g.worker && a.gpu === g.index);
  const rows = gpus.map((g) => {
    const mine = firingOn(g);
    return h('tr', { testid: 'gpu-row', 'data-worker': g.worker, 'data-gpu': String(g.index), 'data-firing': String(mine.length) },
      h('th', { scope: 'row' }, g.worker),
      h('td', {}, `${g.index}: ${g.name}`),
      h('td', { class: 'num', testid: 'gpu-utilization' }, pct(g.utilization)),
      h('td', { class: 'num', testid: 'gpu-memory' }, memory(g)),
      h('td', { class: 'num', testid: 'gpu-temperature' }, temperature(g)),
      h('td', { class: 'num', testid: 'gpu-power' }, power(g)),
      h('td', {}, mine.length
        ? mine.map((a) => h('span', { class: 'badge status-failed', testid: 'gpu-row-alert', title: a.message }, a.kind.replace(/_/g, ' ')))
        : h('span', { class: 'muted' }, 'none')));
  });
  const sampled = Math.max(...gpus.map((g) => Number(g.sampled_at_us) || 0));
  return h('section', { class: 'report-panel', testid: 'gpu-panel', 'data-gpus': String(gpus.length) },
    alerts.length
      ? h('div', { class: 'alerts', testid: 'gpu-alerts' },
        h('h2', {}, `GPU alerts firing: ${alerts.length}`),
        h('ul', {}, alerts.map((a) => h('li', { testid: 'gpu-alert', 'data-kind': a.kind },
          h('strong', {}, `${a.kind} · ${a.worker} · GPU ${a.gpu}: `), a.message,
          h('span', { class: 'muted' }, ` (since ${fmtTime(a.since_us)})`)))))
      : h('p', { class: 'muted', testid: 'gpu-alerts-none' }, 'No GPU alerts firing.'),
    h('div', { class: 'table-wrap' }, h('table', { testid: 'gpu-table' },
      h('caption', { class: 'visually-hidden' }, 'GPUs by worker'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Worker'), h('th', { scope: 'col' }, 'GPU'),
        h('th', { scope: 'col', class: 'num' }, 'Utilisation'), h('th', { scope: 'col', class: 'num' }, 'Memory'),
        h('th', { scope: 'col', class: 'num' }, 'Temperature'), h('th', { scope: 'col', class: 'num' }, 'Power'),
        h('th', { scope: 'col' }, 'Alerts'))),
      h('tbody', {}, rows))),
    h('p', { class: 'muted small' }, `Read ${fmtTime(sampled)}.`));
}

export async function gpusPage(view) {
  const snap = await get('/v1/gpus');
  const s = snap.settings || {};
  view.append(title('GPUs'),
    h('p', { class: 'lead' },
      `Utilisation, memory, temperature and power of each worker’s GPUs, read every ${s.interval ?? '–'}. `
      + `Alerts at ${s.temperature_celsius ?? '–'} °C, ${pct(s.memory_ratio)} memory, `
      + `and ${pct(s.utilization_ratio)} utilisation for ${s.utilization_for ?? '–'}.`),
    gpuPanel(snap));
}
