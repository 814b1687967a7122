// drover dashboard: live updates over server-sent events, confirmations,
// the log tail. No framework, no build step: served as is from the binary.
(function () {
  "use strict";
  var body = document.body;
  var csrf = (document.querySelector('meta[name="csrf"]') || {}).content || "";
  var dot = document.getElementById("live-state");

  function setStatus(id, cls, text) {
    var el = document.getElementById(id);
    if (!el) return;
    var target = el.querySelector("[data-status]") || el;
    target.className = cls;
    target.textContent = text;
  }

  function apply(msg) {
    var k;
    for (k in msg.text || {}) {
      var t = document.getElementById(k);
      if (t) t.textContent = msg.text[k];
    }
    for (k in msg.status || {}) setStatus(k, msg.status[k][0], msg.status[k][1]);
    for (k in msg.cells || {}) {
      var c = document.getElementById(k);
      if (c) { c.className = msg.cells[k][0]; c.title = msg.cells[k][1]; }
    }
    for (k in msg.rows || {}) {
      var row = document.getElementById(k);
      if (!row) continue;
      var tds = row.querySelectorAll("td");
      msg.rows[k].forEach(function (v, i) { if (tds[i + 2]) tds[i + 2].textContent = v; });
    }
    for (k in msg.html || {}) {
      // Rendered and escaped by the server, as the page itself.
      var h = document.getElementById(k);
      if (h) h.innerHTML = msg.html[k];
    }
    body.setAttribute("data-updated", String(Date.now()));
  }

  var live = body.getAttribute("data-live");
  if (live && window.EventSource) {
    var es = new EventSource(live);
    es.onopen = function () { if (dot) dot.className = "live-state on"; };
    es.onmessage = function (e) {
      try { apply(JSON.parse(e.data)); } catch (err) { /* a malformed message changes nothing */ }
    };
    es.addEventListener("end", function (e) {
      es.close();
      if (dot) { dot.className = "live-state off"; dot.title = "signed out: " + e.data; }
    });
    es.onerror = function () { if (dot) dot.className = "live-state off"; };
  }

  // Every admin action asks first.
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm"))) e.preventDefault();
    });
  });

  // What an action did (its redirect carries ?done=…).
  var done = new URLSearchParams(location.search).get("done");
  if (done) {
    var p = document.createElement("p");
    p.className = "notice";
    p.id = "done";
    p.textContent = done;
    var main = document.querySelector("main");
    if (main) main.insertBefore(p, main.firstChild);
  }

  // The last lines of a pod's log, followed live.
  var log = document.getElementById("log");
  if (log && window.fetch && window.TextDecoder) {
    var url = log.getAttribute("data-follow");
    fetch(url, { credentials: "same-origin", headers: { "x-csrf-token": csrf } }).then(function (r) {
      if (!r.ok || !r.body) { return r.text().then(function (t) { log.textContent = t; }); }
      var reader = r.body.getReader();
      var dec = new TextDecoder();
      function more() {
        return reader.read().then(function (x) {
          if (x.done) return;
          var lines = (log.textContent + dec.decode(x.value, { stream: true })).split("\n");
          log.textContent = lines.slice(-500).join("\n");
          log.scrollTop = log.scrollHeight;
          return more();
        });
      }
      return more();
    }).catch(function () { /* the log is optional */ });
  }
})();
