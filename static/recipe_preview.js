// Live preview on the recipe editor: rebuilds the spec from the form (each input says how
// with data-spec), posts it to /api/projects/<slug>/recipes/preview with the session cookie
// and CSRF header, and shows the figures. Nothing is saved; only the latest request counts.
(function () {
  "use strict";
  var form = document.getElementById("recipe-form");
  var url = form && form.dataset.previewUrl;
  if (!url) return;
  var panel = document.querySelector("[data-testid=preview]");
  var state = panel.querySelector("[data-preview-state]");
  var timer = null;
  var inflight = null;

  function cookie(name) {
    var match = document.cookie.match("(?:^|; )" + name + "=([^;]*)");
    return match ? decodeURIComponent(match[1]) : "";
  }

  // Text that is not a number is sent as it is, so the server's message names the field.
  function number(text, integer) {
    text = text.trim();
    if (text === "") return null;
    if (/^-?\d+$/.test(text)) return parseInt(text, 10);
    if (!integer && !isNaN(Number(text))) return Number(text);
    return text;
  }

  function readSpec() {
    var spec = {};
    form.querySelectorAll("[data-spec]").forEach(function (el) {
      var kind = el.dataset.spec;
      if (kind === "choices") {
        spec[el.name] = spec[el.name] || [];
        if (el.checked) spec[el.name].push(el.value);
      } else if (kind === "bool") {
        spec[el.name] = el.checked;
      } else if (kind === "text") {
        spec[el.name] = el.value;
      } else if (kind === "csv") {
        spec[el.name] = el.value.split(",").map(function (s) { return s.trim(); }).filter(Boolean);
      } else {
        spec[el.name] = number(el.value, kind === "int");
      }
    });
    return spec;
  }

  function fig(name, value) {
    var el = panel.querySelector('[data-fig="' + name + '"]');
    if (el) el.textContent = value;
  }

  function cell(text) {
    var td = document.createElement("td");
    td.textContent = text;
    return td;
  }

  function show(report) {
    fig("candidate_clips", report.candidate_clips.toLocaleString());
    fig("selected_clips", report.selected_clips.toLocaleString());
    fig("labels_kept", report.labels_kept.toLocaleString());
    fig("skew_before", report.skew_before.toFixed(1));
    fig("skew_after", report.skew_after.toFixed(1));
    fig("word_skew_before", report.word_skew_before.toFixed(1));
    fig("word_skew_after", report.word_skew_after.toFixed(1));
    ["train", "val", "test"].forEach(function (s) { fig(s, (report.splits[s] || 0).toLocaleString()); });
    var body = panel.querySelector('[data-fig="labels"]');
    body.replaceChildren.apply(body, report.labels.map(function (row) {
      var tr = document.createElement("tr");
      tr.append(cell(row.name), cell(row.before.toLocaleString()), cell(row.after.toLocaleString()));
      return tr;
    }));
    state.className = "muted";
    state.textContent = "What a build would select now (not saved).";
  }

  // An error blanks the figures: numbers from an earlier spec would mislead.
  function fail(message) {
    state.className = "flash error";
    state.textContent = message;
    panel.querySelectorAll("td[data-fig], span[data-fig]").forEach(function (el) { el.textContent = "—"; });
    panel.querySelector('[data-fig="labels"]').replaceChildren();
  }

  function refresh() {
    if (inflight) inflight.abort();
    inflight = new AbortController();
    panel.classList.add("loading");
    fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": cookie("csrftoken") },
      body: JSON.stringify(readSpec()),
      signal: inflight.signal,
    })
      .then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, body: body }; });
      })
      .then(function (res) {
        panel.classList.remove("loading");
        if (res.ok) { show(res.body); return; }
        var detail = res.body.detail;
        fail(typeof detail === "string" ? detail : "Preview failed: " + JSON.stringify(detail));
      })
      .catch(function (err) {
        if (err.name === "AbortError") return;
        panel.classList.remove("loading");
        fail("Preview unavailable: " + err.message);
      });
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 400);
  }

  form.addEventListener("input", later);
  form.addEventListener("change", later);
  refresh();
})();
