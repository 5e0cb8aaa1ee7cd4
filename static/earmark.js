// Behaviour every page shares, kept out of the HTML because the Content-Security-Policy
// allows no inline scripts or style attributes: bars take their width from data-width
// (a percentage), and a select marked data-autosubmit submits its form when changed.
(function () {
  "use strict";
  document.querySelectorAll("[data-width]").forEach(function (el) {
    el.style.width = Math.max(0, Math.min(100, Number(el.dataset.width) || 0)) + "%";
  });
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
})();
