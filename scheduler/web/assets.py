"""The pages' style sheet and script, inline in every page (no build step, no network).

The script does two things: on a served page it fetches the same page's ``<main>`` again
every :data:`REFRESH_MS` and swaps it in (so a new pod shows without a reload, and a hidden tab
stops polling); in a ``simulate --html`` file, where every page sits in the one document, it
shows the section the address's ``#fragment`` names.
"""

from __future__ import annotations

__all__ = ["REFRESH_MS", "SCRIPT", "STYLE"]

REFRESH_MS = 2000

STYLE = """
:root{--fg:#1f2933;--muted:#616e7c;--line:#e4e7eb;--bg:#f5f7fa;--card:#fff;
--ok:#2f9e72;--warn:#e0a526;--bad:#d64545;--accent:#3c6fd1;--soft:#dbe6fb}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
header{background:#1f2d3d;color:#fff;padding:0 24px;display:flex;align-items:center;gap:28px}
header b{font-size:17px;letter-spacing:.5px;padding:14px 0}
nav a{color:#c5d0de;text-decoration:none;padding:15px 10px;display:inline-block}
nav a.on{color:#fff;border-bottom:3px solid #6ea0ff}
main{padding:20px 24px;max-width:1400px}
h1{font-size:20px;margin:4px 0 16px}h2{font-size:16px;margin:22px 0 10px}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:12px}
.tile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.tile .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.4px}
.tile .v{font-size:24px;font-weight:600;margin-top:2px}
.tile .s{color:var(--muted);font-size:12px}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);
border-radius:8px;overflow:hidden}
th{background:#eef1f5;text-align:left;font-weight:600;font-size:12px;color:#3e4c59;
text-transform:uppercase;letter-spacing:.3px}
th,td{padding:7px 10px;border-bottom:1px solid var(--line);vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:last-child td{border-bottom:0}
.bar{position:relative;height:14px;width:160px;background:#edf0f4;border-radius:7px;
overflow:hidden;display:inline-block;vertical-align:middle}
.bar i{position:absolute;left:0;top:0;bottom:0;background:var(--accent);border-radius:7px}
.bar i.warn{background:var(--warn)}.bar i.bad{background:var(--bad)}
.bar b{position:absolute;top:0;bottom:0;width:2px;background:#1f2933}
.meter{white-space:nowrap}td:first-child{overflow-wrap:anywhere;min-width:90px}
.lbl{font-size:12px;color:var(--muted);margin-left:6px;white-space:nowrap}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.Running,.Bound,.Open,.ok{background:#dff5ea;color:#1d7a54}
.Pending,.Pipelined{background:#fdf1d6;color:#8a5a00}
.Inqueue,.Allocated,.Binding{background:var(--soft);color:#234a9c}
.Completed,.Succeeded{background:#eceff3;color:#52606d}
.Failed,.Unknown,.bad,.Closed{background:#fde2e2;color:#a61b1b}
.muted{color:var(--muted)}
.reason{color:#8a5a00;font-size:13px;display:inline-block;min-width:220px;max-width:520px}
.tree{padding-left:calc(var(--d)*18px)}
a{color:var(--accent)}
svg.chart{background:var(--card);border:1px solid var(--line);border-radius:8px}
footer{color:var(--muted);font-size:12px;padding:10px 24px 24px}
"""

SCRIPT = """
(function(){
  var file = document.body.dataset.mode === 'file';
  function show(){
    var id = (location.hash || '#overview').slice(1);
    var found = false;
    document.querySelectorAll('section.page').forEach(function(s){
      var on = s.id === 'page-' + id; s.hidden = !on; found = found || on;});
    if(!found){var first=document.querySelector('section.page'); if(first) first.hidden=false;}
    document.querySelectorAll('nav a').forEach(function(a){
      a.classList.toggle('on', a.getAttribute('href') === '#' + id);});
  }
  if(file){
    window.addEventListener('hashchange', show); show(); return;
  }
  var ms = Number(document.body.dataset.refresh || 0);
  if(!ms) return;
  function tick(){
    if(document.hidden) return;
    fetch(location.pathname + location.search, {headers:{'X-Fragment':'main'}})
      .then(function(r){ return r.ok ? r.text() : null; })
      .then(function(t){ if(t !== null){ document.querySelector('main').innerHTML = t; } })
      .catch(function(){});
  }
  setInterval(tick, ms);
})();
"""
