// The learning curve of a running training run is redrawn every few seconds; jobs.js
// reloads the page once the run's job finishes.
(function () {
  "use strict";
  var img = document.getElementById("curve");
  if (!img || !img.dataset.live) return;
  var base = img.src;
  setInterval(function () { img.src = base + "?t=" + Date.now(); }, 5000);
})();
