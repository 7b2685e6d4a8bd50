// The dashboard shell: hash routing, the API key prompt, page lifecycle.
//
// Routes:
//   #/                     topologies
//   #/topologies/{id}      one topology drawn as a graph
//   #/discovered/{id}      a discovered topology (ingested traces) drawn
//   #/traces?filters       trace list
//   #/traces/{request_id}  one trace: waterfall, path, receipt, explanation
//   #/traces/{a}/diff/{b}  two traces side by side, first divergence explained
//   #/reports?filters      cost, latency, path mix and nodes by time bucket
//   #/gpus                 every worker's GPUs and the GPU alerts firing
//
// Each page is an async function that fills <main>. When it finishes, <main>
// gets `data-state="ready"` (or `error` / `auth`), which the browser tests
// wait for.

import { AuthError, ApiError, apiKey, setApiKey } from './api.js';
import { h, mount, notice } from './dom.js';
import { discoveredPage, topologiesPage, topologyPage } from './topologies.js';
import { tracesPage } from './traces.js';
import { tracePage } from './trace.js';
import { diffPage } from './diff.js';
import { reportsPage } from './reports.js';
import { gpusPage } from './gpus.js';

const main = document.getElementById('main');
const announcer = document.getElementById('announcer');
const dialog = document.getElementById('key-dialog');
const keyForm = document.getElementById('key-form');
const keyInput = document.getElementById('key-input');
const keyReason = document.getElementById('key-reason');

/** Parses `#/a/b?x=1` into path segments and query. */
export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '');
  const [path, qs = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { parts, query: new URLSearchParams(qs) };
}

function route(parts) {
  const [section, id] = parts;
  if (!section || section === 'topologies') {
    return id ? { nav: 'topologies', page: topologyPage, arg: id } : { nav: 'topologies', page: topologiesPage };
  }
  if (section === 'discovered' && id) return { nav: 'topologies', page: discoveredPage, arg: id };
  if (section === 'traces' && id && parts[2] === 'diff' && parts[3]) {
    return { nav: 'traces', page: diffPage, arg: [id, parts[3]] };
  }
  if (section === 'traces') return id ? { nav: 'traces', page: tracePage, arg: id } : { nav: 'traces', page: tracesPage };
  if (section === 'reports') return { nav: 'reports', page: reportsPage };
  if (section === 'gpus') return { nav: 'gpus', page: gpusPage };
  return null;
}

let generation = 0;

async function render() {
  const mine = ++generation;
  const { parts, query } = parseHash(location.hash);
  const r = route(parts);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (r && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.dataset.state = 'loading';
  main.dataset.route = r ? r.nav : 'none';
  main.setAttribute('aria-busy', 'true');
  if (!r) {
    mount(main, h('h1', { tabindex: '-1', 'data-page-title': true }, 'Not found'),
      notice(`There is no page at ${location.hash}.`), h('p', {}, h('a', { href: '#/' }, 'Go to topologies')));
    return finish(mine, 'error');
  }
  // Pages build into a detached container and swap it in at the end, so a
  // slow page never paints half-built and a stale one is dropped.
  const view = h('div', { class: 'page' });
  const ctx = {
    query,
    stale: () => mine !== generation,
    navigate: (hash) => {
      if (location.hash === hash) render();
      else location.hash = hash;
    },
  };
  try {
    await r.page(view, r.arg, ctx);
    if (mine !== generation) return;
    mount(main, view);
    finish(mine, 'ready');
  } catch (err) {
    if (mine !== generation) return;
    if (err instanceof AuthError) {
      mount(main, h('h1', { tabindex: '-1', 'data-page-title': true }, 'API key needed'),
        notice(err.message, 'error'),
        h('p', {}, h('button', { type: 'button', class: 'primary', onclick: () => askKey(err.message) }, 'Enter API key')));
      finish(mine, 'auth');
      askKey(err.message);
    } else if (err instanceof ApiError) {
      mount(main, h('h1', { tabindex: '-1', 'data-page-title': true }, err.status === 404 ? 'Not found' : 'Something went wrong'),
        h('p', { class: 'error', role: 'alert', testid: 'error' }, `${err.message} [${err.code}]`),
        h('p', {}, h('button', { type: 'button', onclick: render }, 'Try again')));
      finish(mine, 'error');
    } else {
      // A bug in the dashboard: show it and leave it in the console.
      console.error(err);
      mount(main, h('h1', { tabindex: '-1', 'data-page-title': true }, 'Something went wrong'),
        h('p', { class: 'error', role: 'alert', testid: 'error' }, String(err && err.message ? err.message : err)));
      finish(mine, 'error');
    }
  }
}

let firstRender = true;

function finish(mine, state) {
  if (mine !== generation) return;
  main.dataset.state = state;
  main.removeAttribute('aria-busy');
  const heading = main.querySelector('[data-page-title]');
  if (heading) {
    document.title = `${heading.textContent} · Glassbox`;
    announcer.textContent = heading.textContent;
    // Move focus to the new page for keyboard and screen-reader users, but
    // not on first load (the browser's own focus start is expected there).
    if (!firstRender) heading.focus({ preventScroll: false });
  }
  firstRender = false;
}

function askKey(reason) {
  keyReason.textContent = reason
    ? `${reason}. The key is kept in this browser's local storage.`
    : "The key is kept in this browser's local storage.";
  keyInput.value = '';
  if (!dialog.open) dialog.showModal();
  keyInput.focus();
}

keyForm.addEventListener('submit', (ev) => {
  const submitter = ev.submitter;
  if (submitter && submitter.value === 'save') {
    setApiKey(keyInput.value.trim());
    render();
  }
});
document.getElementById('key-forget').addEventListener('click', () => {
  setApiKey('');
  dialog.close();
  render();
});
document.getElementById('key-button').addEventListener('click', () =>
  askKey(apiKey() ? 'Replace the stored API key' : ''));

window.addEventListener('hashchange', render);
render();
