// Review queue keys: j/k move between cards, a approves, r goes to the reject reason
// (Enter there rejects), f opens the text fix, p plays the first clip, ? shows the keys.
(function () {
  "use strict";
  const cards = Array.from(document.querySelectorAll("[data-assignment]"));
  const help = document.getElementById("keys-help");
  const helpButton = document.querySelector("[data-keys-help]");
  let current = -1;

  function select(index, scroll) {
    if (!cards.length) return;
    current = Math.max(0, Math.min(cards.length - 1, index));
    cards.forEach((card, i) => card.classList.toggle("current", i === current));
    if (scroll) {
      cards[current].scrollIntoView({ block: "nearest", behavior: "smooth" });
      cards[current].focus({ preventScroll: true });
    }
  }

  function toggleHelp() {
    help.hidden = !help.hidden;
    helpButton.setAttribute("aria-expanded", String(!help.hidden));
  }

  function submit(form) {
    if (form && !form.dataset.sent) {
      form.dataset.sent = "1"; // one decision per card, even if the key repeats
      form.requestSubmit();
    }
  }

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable]") !== null;
  }

  cards.forEach((card, i) => card.addEventListener("focusin", () => select(i, false)));
  cards.forEach((card, i) => card.addEventListener("click", () => select(i, false)));
  helpButton.addEventListener("click", toggleHelp);
  document.querySelectorAll("form").forEach((form) =>
    form.addEventListener("submit", () => {
      form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    })
  );

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target.matches("select[data-reason]") && event.key === "Enter" && target.value) {
      event.preventDefault();
      submit(target.form);
      return;
    }
    if (typing(target)) {
      if (event.key === "Escape") cards[current]?.focus();
      return;
    }
    const card = cards[current];
    switch (event.key) {
      case "j": select(current + 1, true); break;
      case "k": select(current - 1, true); break;
      case "a": if (card) submit(card.querySelector("form[data-approve]")); break;
      case "r": card?.querySelector("select[data-reason]")?.focus(); break;
      case "f": {
        const box = card?.querySelector("details[data-fix]");
        if (box) { box.open = true; box.querySelector("textarea").focus(); }
        break;
      }
      case "p": {
        const audio = card?.querySelector("audio");
        if (audio) audio.paused ? audio.play() : audio.pause();
        break;
      }
      case "?": toggleHelp(); break;
      default: return;
    }
    event.preventDefault();
  });

  select(0, false);
})();
