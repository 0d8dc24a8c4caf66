// Switchyard dashboard: the one websocket, live health badges with countdowns, the
// fallback chain panel, conflict banners, save-failure banners and the feedback line
// beside the control that was pressed (dashboard/feedback.py).
// Message kinds are defined in dashboard/channel_names.py.
(function () {
  "use strict";

  var offset = 0; // server clock minus browser clock, seconds
  var latest = {}; // "group:auto" -> newest version announced over the websocket
  var inflight = {}; // "group:auto" -> htmx requests under way from that element
  var socket = null;
  var retryMs = 500;

  function setServerNow(now) {
    if (typeof now === "number" && now > 0) offset = now - Date.now() / 1000;
  }

  function serverNow() {
    return Date.now() / 1000 + offset;
  }

  function formatRemaining(seconds) {
    var s = Math.ceil(seconds);
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    var rest = s % 60;
    return m + ":" + (rest < 10 ? "0" : "") + rest;
  }

  // ---------------------------------------------------------------- countdowns
  function tick() {
    var now = serverNow();
    document.querySelectorAll("[data-until]").forEach(function (badge) {
      var until = parseFloat(badge.dataset.until);
      var out = badge.querySelector("[data-countdown]");
      if (!until || !out) return;
      var left = until - now;
      if (left > 0) {
        out.textContent = formatRemaining(left);
      } else {
        out.textContent = "over, next call probes";
        badge.classList.add("badge-probe-eligible");
      }
    });
  }

  // ---------------------------------------------------------------- feedback lines
  // The line nearest to a control: in its closest ancestor that has one (a form's own
  // action-bar line before its fields' lines), without leaving the versioned box (a card,
  // a form) it belongs to.
  function feedbackSlot(elt) {
    for (var node = elt; node && node.querySelector; node = node.parentElement) {
      if (node.matches("[data-feedback]")) return node;
      if (node.matches("[data-versioned]")) return null; // its banners are the nearest
      var slot = node.querySelector("[data-feedback-main]") || node.querySelector("[data-feedback]");
      if (slot) return slot;
    }
    return null;
  }

  function say(slot, tone, text) {
    slot.hidden = false;
    slot.dataset.tone = tone;
    slot.className = "feedback feedback-" + tone;
    slot.textContent = "";
    var span = document.createElement("span");
    span.dataset.feedbackText = "";
    span.textContent = text;
    slot.appendChild(span);
    if (tone === "conflict" && slot.dataset.reloadUrl) {
      var reload = document.createElement("a");
      reload.className = "button small";
      reload.href = slot.dataset.reloadUrl;
      reload.textContent = "Reload";
      slot.append(" ", reload);
    }
  }

  // Scrolls only when the line is off screen, and only as far as needed.
  function reveal(slot) {
    if (slot.scrollIntoView) slot.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  // ---------------------------------------------------------------- conflicts
  function versionKey(el) {
    return el.dataset.versioned;
  }

  function refreshConflicts() {
    document.querySelectorAll("[data-versioned]").forEach(function (el) {
      var key = versionKey(el);
      var banner = el.querySelector("[data-conflict-banner]");
      if (!banner || inflight[key] > 0 || !(key in latest)) return;
      var mine = parseInt(el.dataset.version, 10);
      var theirs = latest[key];
      if (theirs === 0 || theirs > mine) {
        banner.hidden = false;
        var text = banner.querySelector("[data-conflict-text]");
        if (text && theirs === 0) text.textContent = "Deleted in another window.";
        // The same news beside the form's Save, for a user working far from the banner
        // (a conflict the server already said there stays as it said it).
        el.querySelectorAll("[data-feedback-main]").forEach(function (slot) {
          if (slot.dataset.tone === "conflict" && theirs !== 0) return;
          say(slot, "conflict", text ? text.textContent : "Changed in another window \u2014 reload to see it.");
        });
      }
    });
  }

  function announce(key, version) {
    var previous = latest[key];
    latest[key] = version === 0 || !previous ? version : Math.max(previous, version);
    refreshConflicts();
  }

  // ---------------------------------------------------------------- pushes
  function replaceBadges(badges) {
    Object.keys(badges).forEach(function (key) {
      document.querySelectorAll('[data-badge="' + CSS.escape(key) + '"]').forEach(function (old) {
        old.insertAdjacentHTML("beforebegin", badges[key]);
        var fresh = old.previousElementSibling;
        old.remove();
        if (fresh && window.htmx) window.htmx.process(fresh); // its re-enable button posts via htmx
      });
    });
    tick();
  }

  function addCall(message) {
    document.querySelectorAll('[data-calls="' + CSS.escape(message.group) + '"]').forEach(function (list) {
      if (list.querySelector('[data-call-id="' + CSS.escape(message.call_id) + '"]')) return;
      list.insertAdjacentHTML("afterbegin", message.html);
      var empty = list.parentElement.querySelector("[data-calls-empty]");
      if (empty) empty.hidden = true;
      var limit = parseInt(list.dataset.limit || "20", 10);
      while (list.children.length > limit) list.lastElementChild.remove();
      countRecord(list.parentElement.querySelector("[data-record-count]"));
    });
  }

  // "N records kept" follows the live list: one more per new call, never past the
  // ledger's capacity (retention trims the oldest rows beyond it).
  function countRecord(counter) {
    if (!counter) return;
    var n = (parseInt(counter.dataset.recordCount, 10) || 0) + 1;
    var capacity = parseInt(counter.dataset.capacity, 10);
    if (capacity > 0 && n > capacity) n = capacity;
    counter.dataset.recordCount = String(n);
    counter.textContent = n + (n === 1 ? " record" : " records") + " kept" +
      (capacity > 0 ? ", capacity " + capacity : "");
  }

  // ---------------------------------------------------------------- calls page
  function addCallRow(message) {
    var body = document.querySelector("[data-call-rows][data-live-query]");
    if (!body || body.querySelector('[data-call-id="' + CSS.escape(message.call_id) + '"]')) return;
    body.insertAdjacentHTML("afterbegin", message.html);
    var empty = document.querySelector("[data-calls-empty]");
    if (empty) empty.hidden = true;
  }

  function watchCalls() {
    var body = document.querySelector("[data-call-rows][data-live-query]");
    if (body && socket && socket.readyState === 1) {
      socket.send(JSON.stringify({ watch_calls: body.dataset.liveQuery || "" }));
    }
  }

  // ---------------------------------------------------------------- spend and limits
  // Every finished call (refused ones too) moves spend and the counters: the Spend panel
  // and the groups' limits lines reload on "switchyard:spend" / "switchyard:limits" (their
  // hx-trigger). Throttled: the first call arms one reload SPEND_DELAY_MS later, calls in
  // between join it, so a busy gateway costs a page one read per fragment per interval,
  // and the ledger writer (every 0.2 s) has written the call by then.
  var SPEND_DELAY_MS = 2000;
  var spendTimer = null;
  var spendGroups = {};

  function spendChanged(group) {
    if (!document.querySelector("[data-spend-panel], [data-limit-use]")) return;
    spendGroups[group] = true;
    if (spendTimer !== null) return;
    spendTimer = setTimeout(function () {
      var groups = Object.keys(spendGroups);
      spendTimer = null;
      spendGroups = {};
      var panel = document.querySelector("[data-spend-panel]");
      if (panel) htmx.trigger(panel, "switchyard:spend");
      groups.forEach(function (name) {
        document.querySelectorAll('[data-limit-use="' + CSS.escape(name) + '"]').forEach(function (line) {
          htmx.trigger(line, "switchyard:limits");
        });
      });
    }, SPEND_DELAY_MS);
  }

  // ---------------------------------------------------------------- live statistics
  function refreshStats() {
    var cells = document.querySelectorAll("[data-stats]");
    if (!cells.length || document.hidden) return;
    var keys = {};
    cells.forEach(function (cell) { keys[cell.dataset.stats] = true; });
    var query = Object.keys(keys).map(function (k) { return "key=" + encodeURIComponent(k); }).join("&");
    fetch("/stats/?" + query, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) return;
        setServerNow(data.now);
        Object.keys(data.stats || {}).forEach(function (key) {
          document.querySelectorAll('[data-stats="' + CSS.escape(key) + '"]').forEach(function (old) {
            old.outerHTML = data.stats[key];
          });
        });
      })
      .catch(function () { /* the next refresh tries again */ });
  }

  // ------------------------------------------------- selects that submit their form
  // (the Content-Security-Policy allows no inline onchange= handler)
  document.addEventListener("change", function (evt) {
    var select = evt.target.closest ? evt.target.closest("[data-submit-on-change]") : null;
    if (select && select.form) select.form.submit();
  });

  // ---------------------------------------------------------------- copy buttons
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("[data-copy]") : null;
    if (!button) return;
    var text = button.dataset.copy;
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text) && done(); });
    } else if (fallbackCopy(text)) {
      done();
    }
  });

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
    return ok;
  }

  function onMessage(event) {
    var message;
    try {
      message = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    setServerNow(message.now);
    switch (message.kind) {
      case "health.changed":
        replaceBadges(message.badges || {});
        break;
      case "call.recorded":
        addCall(message);
        spendChanged(message.group);
        break;
      case "calls.row":
        addCallRow(message);
        break;
      case "group.changed":
        announce("group:" + message.name, message.version);
        break;
      case "provider.changed":
        announce("provider:" + message.name, message.version);
        break;
      case "global.changed":
        announce("global:", message.version);
        break;
    }
  }

  function liveState(state, text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    el.dataset.state = state;
    el.textContent = text;
  }

  function connect() {
    var path = document.body.dataset.wsPath;
    if (!path) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + path);
    socket.onopen = function () {
      retryMs = 500;
      watchCalls();
      liveState("live", "live");
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      if (event.code === 4403) {
        liveState("down", "live updates refused: log in again");
        return;
      }
      liveState("down", "live updates lost, reconnecting\u2026");
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 10000);
    };
  }

  // ---------------------------------------------------------------- htmx hooks
  function containerKey(elt) {
    var box = elt && elt.closest ? elt.closest("[data-versioned]") : null;
    return box ? versionKey(box) : null;
  }

  function showTransport(elt, text) {
    var box = elt && elt.closest ? elt.closest("[data-versioned]") : null;
    var banner = (box && box.querySelector("[data-transport-banner]")) || document.getElementById("global-errors");
    if (banner) {
      banner.hidden = false;
      banner.textContent = text;
    }
    var slot = elt ? feedbackSlot(elt) : null; // and beside the control that was pressed
    if (slot) {
      say(slot, "transport", text);
      reveal(slot);
    }
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var key = containerKey(evt.detail.elt);
    evt.detail.xhr.switchyardKey = key;
    if (key) inflight[key] = (inflight[key] || 0) + 1;
    var box = evt.detail.elt.closest && evt.detail.elt.closest("[data-versioned]");
    var banner = box && box.querySelector("[data-transport-banner]");
    if (banner) banner.hidden = true;
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    var key = evt.detail.xhr.switchyardKey;
    if (key) inflight[key] = Math.max(0, (inflight[key] || 1) - 1);
  });
  document.addEventListener("htmx:sendError", function (evt) {
    showTransport(evt.detail.elt, "Not saved: the server could not be reached (network error). Check the connection and try again.");
  });
  document.addEventListener("htmx:timeout", function (evt) {
    showTransport(evt.detail.elt, "Not saved: the server did not answer in time. Reload to see whether the change was applied.");
  });
  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail.xhr.status;
    showTransport(evt.detail.elt, "Not saved: the server answered HTTP " + status + ". Reload to see the current state.");
  });
  document.addEventListener("htmx:afterSettle", function (evt) {
    refreshConflicts();
    tick();
    // The answer's feedback line came with the swapped-in content: keep it on screen.
    var fresh = evt.target;
    var slot = fresh && fresh.matches && fresh.matches("[data-feedback]:not([hidden])")
      ? fresh
      : fresh && fresh.querySelector ? fresh.querySelector("[data-feedback]:not([hidden])") : null;
    if (slot) reveal(slot);
  });

  document.addEventListener("DOMContentLoaded", function () {
    setServerNow(parseFloat(document.body.dataset.serverNow));
    tick();
    setInterval(tick, 500);
    setInterval(refreshStats, 5000);
    connect();
  });
})();
