// ppprof interactive timeline: one step of one pipeline, one row per stage
// (or per chunk). Wheel or +/- zooms around the pointer, drag pans,
// double-click resets, hovering an op shows its step, micro-batch, duration
// and bytes. Plain JS, no libraries; every trace string goes through
// textContent, never innerHTML.
(function () {
  "use strict";
  var dataEl = document.getElementById("ppprof-data");
  var root = document.getElementById("tl");
  if (!dataEl || !root) { return; }
  var D = JSON.parse(dataEl.textContent);
  var canvas = document.getElementById("tl-canvas");
  var tip = document.getElementById("tl-tip");
  var ctx = canvas.getContext("2d");
  var O = D.ops, n = O.k.length, rows = D.rows;

  // Per row, the ops in start order: boxes (compute and other) and waits.
  var boxes = [], waits = [];
  for (var r = 0; r < rows.length; r++) { boxes.push([]); waits.push([]); }
  for (var i = 0; i < n; i++) { (O.wait[i] ? waits : boxes)[O.row[i]].push(i); }
  var byStart = function (a, b) { return O.s[a] - O.s[b] || a - b; };
  boxes.forEach(function (l) { l.sort(byStart); });
  waits.forEach(function (l) { l.sort(byStart); });

  var LABEL_W = 132, TOP = 30, BOTTOM = 26, RIGHT = 12;
  var rowH = Math.max(8, Math.min(26, Math.floor(640 / Math.max(rows.length, 1))));
  var full = { t0: 0, t1: Math.max(D.durUs, 1) };
  var view = { t0: full.t0, t1: full.t1 };
  var hover = -1, drag = null, width = 0, dpr = 1;

  function plotW() { return Math.max(10, width - LABEL_W - RIGHT); }
  function xOf(t) { return LABEL_W + (t - view.t0) / (view.t1 - view.t0) * plotW(); }
  function tOf(x) { return view.t0 + (x - LABEL_W) / plotW() * (view.t1 - view.t0); }
  function yOf(r) { return TOP + r * rowH; }

  function resize() {
    width = root.clientWidth;
    dpr = window.devicePixelRatio || 1;
    var h = TOP + rows.length * rowH + BOTTOM;
    canvas.style.height = h + "px";
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(h * dpr);
    draw();
  }

  function niceStep(span, px) {
    var raw = span / Math.max(px / 90, 1), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
  }

  function fmtMs(us) {
    var ms = us / 1000;
    if (Math.abs(ms) >= 100) { return ms.toFixed(1); }
    if (Math.abs(ms) >= 1) { return ms.toFixed(3); }
    return ms.toFixed(4);
  }

  function fmtBytes(b) {
    if (!b) { return "0"; }
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], k = 0;
    while (b >= 1024 && k < u.length - 1) { b /= 1024; k++; }
    return (k ? b.toFixed(1) : String(b)) + " " + u[k];
  }

  function drawOp(i, thin) {
    var x0 = xOf(O.s[i]), x1 = xOf(O.e[i]);
    if (x1 < LABEL_W || x0 > width - RIGHT) { return; }
    x0 = Math.max(x0, LABEL_W); x1 = Math.min(x1, width - RIGHT);
    var w = Math.max(x1 - x0, 1), y = yOf(O.row[i]);
    var h = thin ? Math.max(2, rowH * 0.16) : rowH * 0.72;
    var top = y + (rowH - h) / 2;
    ctx.fillStyle = O.pend[i] ? D.pendingColor : D.kcol[O.k[i]];
    var gap = w > 4 ? 0.5 : 0;
    ctx.fillRect(x0 + gap, top, w - 2 * gap, h);
    if (O.pend[i] && !thin) {
      ctx.fillStyle = D.kcol[O.k[i]];
      ctx.fillRect(x0 + 2, top + 2, Math.max(w - 4, 0), Math.max(h - 4, 0));
    }
    if (!thin && O.mb[i] >= 0 && rowH >= 12) {
      var lbl = String(O.mb[i]);
      if (ctx.measureText(lbl).width + 4 <= w) {
        ctx.fillStyle = "#ffffff";
        ctx.fillText(lbl, x0 + w / 2, top + h / 2);
      }
    }
  }

  function draw() {
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var h = TOP + rows.length * rowH + BOTTOM;
    ctx.clearRect(0, 0, width, h);
    ctx.font = "11px system-ui, Arial, sans-serif";
    ctx.textBaseline = "middle";
    // Rows: background, label.
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r];
      if (row.slowest) { ctx.fillStyle = "rgba(240,228,66,0.30)"; ctx.fillRect(0, yOf(r), width, rowH); }
      else if (row.stage % 2 === 1) { ctx.fillStyle = "#f4f4f4"; ctx.fillRect(0, yOf(r), width, rowH); }
      if (rowH >= 11 || r % Math.ceil(12 / rowH) === 0) {
        ctx.fillStyle = "#1d1d1f"; ctx.textAlign = "right";
        ctx.fillText(row.label + (row.slowest ? " \u25B8" : ""), LABEL_W - 8, yOf(r) + rowH / 2);
      }
    }
    // Ops, clipped to the plot area.
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, 0, plotW(), h); ctx.clip();
    ctx.textAlign = "center";
    ctx.font = (rowH >= 16 ? "10px" : "9px") + " system-ui, Arial, sans-serif";
    for (r = 0; r < rows.length; r++) {
      waits[r].forEach(function (i) { drawOp(i, true); });
      boxes[r].forEach(function (i) { drawOp(i, false); });
    }
    if (hover >= 0) {
      var x0 = xOf(O.s[hover]), x1 = xOf(O.e[hover]), hy = yOf(O.row[hover]);
      ctx.strokeStyle = "#000000"; ctx.lineWidth = 2;
      ctx.strokeRect(x0, hy + 1, Math.max(x1 - x0, 2), rowH - 2);
    }
    // Phases.
    ctx.setLineDash([5, 3]); ctx.strokeStyle = "#555555"; ctx.lineWidth = 1;
    [D.warmupEndUs, D.cooldownStartUs].forEach(function (t) {
      if (t === null || t === undefined) { return; }
      var x = xOf(t);
      ctx.beginPath(); ctx.moveTo(x, TOP - 10); ctx.lineTo(x, TOP + rows.length * rowH); ctx.stroke();
    });
    ctx.setLineDash([]);
    if (D.warmupEndUs !== null && D.warmupEndUs !== undefined) {
      ctx.fillStyle = "#555555"; ctx.font = "11px system-ui, Arial, sans-serif";
      var ph = [["warmup", 0, D.warmupEndUs], ["steady", D.warmupEndUs, D.cooldownStartUs], ["cooldown", D.cooldownStartUs, D.durUs]];
      ph.forEach(function (p) {
        var a = Math.max(xOf(p[1]), LABEL_W), b = Math.min(xOf(p[2]), width - RIGHT);
        if (b - a > ctx.measureText(p[0]).width + 6) { ctx.fillText(p[0], (a + b) / 2, TOP - 12); }
      });
    }
    ctx.restore();
    // Time axis.
    var step = niceStep(view.t1 - view.t0, plotW()), yAx = TOP + rows.length * rowH;
    var dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / 1000) + 1e-9)));
    ctx.strokeStyle = "#888888"; ctx.fillStyle = "#333333"; ctx.textAlign = "center";
    ctx.font = "11px system-ui, Arial, sans-serif";
    ctx.beginPath(); ctx.moveTo(LABEL_W, yAx + 0.5); ctx.lineTo(width - RIGHT, yAx + 0.5); ctx.stroke();
    for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      var x = Math.round(xOf(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, yAx); ctx.lineTo(x, yAx + 4); ctx.stroke();
      ctx.fillText((t / 1000).toFixed(dec), x, yAx + 13);
    }
    ctx.textAlign = "left"; ctx.fillStyle = "#5f6368";
    ctx.fillText("time (ms)", 4, yAx + 13);
  }

  // find returns the op under (x, y) in canvas CSS pixels, or -1.
  function find(x, y) {
    if (x < LABEL_W || y < TOP) { return -1; }
    var r = Math.floor((y - TOP) / rowH);
    if (r < 0 || r >= rows.length) { return -1; }
    var t = tOf(x), slack = (view.t1 - view.t0) / plotW() * 3;
    var best = -1;
    [boxes[r], waits[r]].some(function (list, pass) {
      var tol = pass ? slack : 0;
      for (var k = 0; k < list.length; k++) {
        var i = list[k];
        if (O.s[i] - tol > t) { break; }
        if (O.e[i] + tol >= t) { best = i; }
      }
      return best >= 0;
    });
    return best;
  }

  function describe(i) {
    var row = rows[O.row[i]], kind = D.kinds[O.k[i]];
    var lines = [];
    lines.push(kind + "   stage " + row.stage + (O.chunk[i] > 0 || D.chunks > 1 ? " chunk " + O.chunk[i] : "") + "   rank " + O.rank[i]);
    lines.push("step " + D.step + "   micro-batch " + (O.mb[i] >= 0 ? O.mb[i] : "-"));
    lines.push("start " + fmtMs(O.s[i]) + " ms   duration " + fmtMs(O.e[i] - O.s[i]) + " ms");
    if (O.b[i] > 0 || O.sh[i] > 0 || O.dt[i] > 0) {
      lines.push("bytes " + fmtBytes(O.b[i]) + (O.sh[i] > 0 ? "   shape " + D.shapes[O.sh[i]] : "") + (O.dt[i] > 0 ? "   dtype " + D.dtypes[O.dt[i]] : ""));
    }
    if (O.pend[i]) { lines.push("pending: never ended (drawn to the dump time)"); }
    return lines.join("\n");
  }

  function showTip(i, cx, cy) {
    if (i < 0) { tip.style.display = "none"; return; }
    tip.textContent = describe(i);
    tip.style.display = "block";
    var left = cx + 14, top = cy + 14;
    if (left + tip.offsetWidth > root.clientWidth) { left = Math.max(0, cx - tip.offsetWidth - 14); }
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }

  function local(ev) {
    var b = canvas.getBoundingClientRect();
    return { x: ev.clientX - b.left, y: ev.clientY - b.top };
  }

  function zoom(factor, x) {
    var t = tOf(x), span = (view.t1 - view.t0) * factor;
    span = Math.min(Math.max(span, 0.01), (full.t1 - full.t0) * 1.5);
    var f = (x - LABEL_W) / plotW();
    view.t0 = t - f * span; view.t1 = view.t0 + span;
    draw();
  }

  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = local(ev);
    zoom(Math.pow(1.0015, ev.deltaY), Math.max(p.x, LABEL_W));
  }, { passive: false });
  canvas.addEventListener("mousedown", function (ev) {
    drag = { x: ev.clientX, t0: view.t0, t1: view.t1 };
    canvas.classList.add("drag");
  });
  window.addEventListener("mouseup", function () { drag = null; canvas.classList.remove("drag"); });
  canvas.addEventListener("mousemove", function (ev) {
    var p = local(ev);
    if (drag) {
      var dt = (ev.clientX - drag.x) / plotW() * (drag.t1 - drag.t0);
      view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt;
      showTip(-1); draw();
      return;
    }
    var i = find(p.x, p.y);
    if (i !== hover) { hover = i; draw(); }
    var rb = root.getBoundingClientRect();
    showTip(i, ev.clientX - rb.left, ev.clientY - rb.top);
  });
  canvas.addEventListener("mouseleave", function () { hover = -1; showTip(-1); draw(); });
  canvas.addEventListener("dblclick", function () { view.t0 = full.t0; view.t1 = full.t1; draw(); });
  document.getElementById("tl-in").addEventListener("click", function () { zoom(1 / 1.6, LABEL_W + plotW() / 2); });
  document.getElementById("tl-out").addEventListener("click", function () { zoom(1.6, LABEL_W + plotW() / 2); });
  document.getElementById("tl-reset").addEventListener("click", function () { view.t0 = full.t0; view.t1 = full.t1; draw(); });
  canvas.tabIndex = 0;
  canvas.addEventListener("keydown", function (ev) {
    if (ev.key === "+" || ev.key === "=") { zoom(1 / 1.6, LABEL_W + plotW() / 2); }
    else if (ev.key === "-") { zoom(1.6, LABEL_W + plotW() / 2); }
    else if (ev.key === "0") { view.t0 = full.t0; view.t1 = full.t1; draw(); }
  });
  if (window.ResizeObserver) { new ResizeObserver(function () { if (root.clientWidth !== width) { resize(); } }).observe(root); }
  else { window.addEventListener("resize", resize); }
  resize();

  // For tests and the curious: find an op and where it is on screen.
  window.ppprofTimeline = {
    ready: true,
    ops: n,
    find: function (kind, row, mb) {
      for (var i = 0; i < n; i++) {
        if (D.kinds[O.k[i]] === kind && O.row[i] === row && O.mb[i] === mb) { return i; }
      }
      return -1;
    },
    center: function (i) {
      var b = canvas.getBoundingClientRect();
      return { x: b.left + (Math.max(xOf(O.s[i]), LABEL_W) + Math.min(xOf(O.e[i]), width - RIGHT)) / 2, y: b.top + yOf(O.row[i]) + rowH / 2 };
    }
  };
  canvas.setAttribute("data-ready", "1");
})();
