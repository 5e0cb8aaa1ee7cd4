// Live progress for unfinished jobs: polls /api/jobs/<id> with the session cookie and
// updates the bar; reloads the page once a job finishes, to show its result or error.
(function () {
  "use strict";
  var FINISHED = { succeeded: true, failed: true, cancelled: true };
  function update(el, job) {
    var bar = el.querySelector(".progress .bar");
    var text = el.querySelector(".progress-text");
    if (bar) {
      bar.style.width = (job.percent || 0) + "%";
      bar.classList.toggle("indeterminate", job.percent === null && job.state === "running");
      bar.parentNode.setAttribute("aria-valuenow", job.percent || 0);
    }
    if (text) {
      text.textContent = job.progress_text;
    }
  }
  function poll() {
    var pending = document.querySelectorAll("[data-job][data-state=queued], [data-job][data-state=running]");
    if (!pending.length) return;
    var requests = Array.prototype.map.call(pending, function (el) {
      return fetch("/api/jobs/" + el.dataset.job, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (job) {
          if (!job) return false;
          update(el, job);
          return job.state !== el.dataset.state && FINISHED[job.state];
        });
    });
    Promise.all(requests).then(function (changed) {
      if (changed.some(Boolean)) { window.location.reload(); } else { setTimeout(poll, 2000); }
    }, function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 1000);
})();
