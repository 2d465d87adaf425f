// Tickwork console script: confirmations, the live schedule preview of the job form, the
// fields of an alarm channel's kind, the live log of a run, the dashboard's period and the job
// list's ticks. Plain browser JavaScript with no dependencies; pages work without it.
(function () {
  "use strict";

  // Destructive buttons ask first.
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-confirm='1']");
    if (b && !window.confirm(document.documentElement.lang.indexOf("zh") === 0 ? "确定吗？" : "Are you sure?")) {
      ev.preventDefault();
    }
  });

  function text(el, s) { el.textContent = s; }

  // Next fire times while a schedule is typed: ask the admin after a short pause.
  function setupPreview() {
    var box = document.getElementById("preview");
    var type = document.getElementById("f-schedule_type");
    var conf = document.getElementById("f-schedule_conf");
    var zone = document.getElementById("f-time_zone");
    if (!box || !type || !conf) return;
    var body = document.getElementById("preview-body");
    var timer = null;
    var seq = 0;
    function render(data) {
      body.innerHTML = "";
      if (data.error) {
        var p = document.createElement("p");
        p.className = "error";
        p.id = "preview-error";
        text(p, data.error);
        body.appendChild(p);
        return;
      }
      var ol = document.createElement("ol");
      ol.className = "fires";
      (data.fires || []).forEach(function (f) {
        var li = document.createElement("li");
        text(li, f);
        ol.appendChild(li);
      });
      body.appendChild(ol);
    }
    function ask() {
      var mine = ++seq;
      var q = new URLSearchParams({
        schedule_type: type.value,
        schedule_conf: conf.value,
        time_zone: zone ? zone.value : ""
      });
      fetch(box.getAttribute("data-preview") + "?" + q.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) { if (mine === seq) render(data); })
        .catch(function () { /* keep what is shown */ });
    }
    function later() {
      clearTimeout(timer);
      timer = setTimeout(ask, 250);
    }
    [type, conf, zone].forEach(function (el) {
      if (el) { el.addEventListener("input", later); el.addEventListener("change", later); }
    });
  }

  // The log of a run: ask for new lines every second until the run is over.
  function setupLog() {
    var pre = document.getElementById("log");
    if (!pre) return;
    var url = pre.getAttribute("data-log");
    var status = document.getElementById("log-status");
    var state = document.getElementById("run-state");
    var next = 1;
    var quiet = 0;
    function poll() {
      fetch(url + "?from=" + next, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          // The badge shows the state's label; its code is the tooltip and data-state.
          if (data.state && state && state.getAttribute("data-state") !== data.state) {
            text(state, data.state_label || data.state);
            state.setAttribute("data-state", data.state);
            state.setAttribute("title", data.state);
          }
          if (data.error) {
            text(status, data.error);
            quiet++;
          } else {
            if (data.content) {
              var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
              pre.appendChild(document.createTextNode(data.content));
              if (atBottom) pre.scrollTop = pre.scrollHeight;
            }
            next = data.next || next;
            if (data.end) {
              text(status, status.getAttribute("data-end"));
              pre.setAttribute("data-ended", "1");
              return;
            }
            text(status, status.getAttribute("data-following"));
          }
          // An executor that keeps failing is asked less often.
          setTimeout(poll, quiet > 5 ? 5000 : 1000);
        })
        .catch(function () { setTimeout(poll, 3000); });
    }
    poll();
  }

  // The alarm channel form shows only the settings of the chosen kind (all without script).
  function setupChannelKind() {
    var form = document.getElementById("channel-form");
    var kind = document.getElementById("f-kind");
    if (!form || !kind) { return; }
    var mail = ["host", "port", "tls", "user", "password", "from", "to"];
    var keys = {
      email: mail,
      webhook: ["url", "secret"], dingtalk: ["url", "secret"], feishu: ["url", "secret"],
      wecom: ["url"], slack: ["url"]
    };
    var all = mail.concat(["url", "secret"]);
    function show() {
      var own = keys[kind.value] || all;
      all.forEach(function (k) {
        var el = document.getElementById("f-" + k);
        var field = el && el.closest(".field");
        if (field) { field.hidden = own.indexOf(k) < 0; }
      });
    }
    kind.addEventListener("change", show);
    show();
  }

  // The dashboard's period: a date typed chooses "dates", a period chosen clears the dates
  // (without script the choice says which one counts).
  function setupPeriod() {
    var range = document.getElementById("period-range");
    var from = document.getElementById("period-from");
    var to = document.getElementById("period-to");
    if (!range || !from || !to) { return; }
    [from, to].forEach(function (el) {
      el.addEventListener("change", function () { if (el.value) { range.value = "dates"; } });
    });
    range.addEventListener("change", function () {
      if (range.value !== "dates") { from.value = ""; to.value = ""; }
    });
  }

  // The job list: "tick all on this page", the count of ticked jobs, and a page size that
  // applies as soon as it is chosen.
  function setupTicks() {
    var all = document.getElementById("tick-all");
    var count = document.getElementById("ticked-count");
    var ticks = function () { return document.querySelectorAll("input.tick[name='ids']"); };
    function recount() {
      var n = 0;
      ticks().forEach(function (t) { if (t.checked) n++; });
      if (count) text(count, String(n));
      if (all) {
        all.checked = n > 0 && n === ticks().length;
        all.indeterminate = n > 0 && n < ticks().length;
      }
    }
    if (all) {
      all.addEventListener("change", function () {
        ticks().forEach(function (t) { t.checked = all.checked; });
        recount();
      });
    }
    ticks().forEach(function (t) { t.addEventListener("change", recount); });
    recount();
    document.querySelectorAll("select[data-submit='1']").forEach(function (s) {
      s.addEventListener("change", function () { if (s.form) s.form.submit(); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupTicks();
    setupPreview();
    setupChannelKind();
    setupLog();
    setupPeriod();
  });
})();
