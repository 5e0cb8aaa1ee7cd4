// The HIT page: a waveform player per clip, the "heard in full" lock, hints, the logged
// video hint, live caption checks (caption_rules.js with the server's rule table) and the
// keyboard. Plain DOM, no framework: it has to stay quick on a slow laptop, so the
// waveform is redrawn only while a clip plays or when something changes.
(function () {
  "use strict";

  var table = JSON.parse(document.getElementById("caption-rules").textContent);
  var hit = JSON.parse(document.getElementById("hit-data").textContent);
  var Rules = window.EarmarkCaptionRules;
  var form = document.getElementById("captions");
  var csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;
  var submitButton = document.querySelector("[data-submit]");
  var readyText = document.querySelector("[data-ready]");
  var instructions = document.getElementById("instructions");
  var SEEK_SECONDS = 2;
  var HEARD_SHARE = 0.95; // of the clip's length heard in order, at most a jump of a second
  var BUCKETS = 200;
  var clips = [];
  var current = null;
  var submitting = false;

  function post(url) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf, "Accept": "application/json" },
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (!response.ok) throw new Error(body.error || response.status + " " + response.statusText);
        return body;
      });
    });
  }

  function clock(seconds) {
    seconds = Math.max(0, Math.floor(seconds || 0));
    var s = seconds % 60;
    return Math.floor(seconds / 60) + ":" + (s < 10 ? "0" : "") + s;
  }

  // Player ------------------------------------------------------------------------------

  function Clip(section, data) {
    this.section = section;
    this.data = data;
    this.audio = section.querySelector("[data-audio]");
    this.canvas = section.querySelector("[data-wave]");
    this.playButton = section.querySelector("[data-play]");
    this.time = section.querySelector("[data-time]");
    this.heardState = section.querySelector("[data-heard-state]");
    this.box = section.querySelector("[data-box]");
    this.textarea = section.querySelector("textarea");
    this.lock = section.querySelector("[data-lock]");
    this.checks = section.querySelector("[data-checks]");
    this.count = section.querySelector("[data-count]");
    this.videoButton = section.querySelector("[data-video-open]");
    this.video = section.querySelector("[data-video]");
    this.heard = data.heard;
    this.covered = new Uint8Array(BUCKETS);
    this.lastTime = 0;
    this.touched = this.textarea.value.trim() !== "" || this.checks.children.length > 0;
    this.errors = [];
    this.bind();
    this.resize();
    this.validate();
  }

  Clip.prototype.duration = function () {
    var d = this.audio.duration;
    return isFinite(d) && d > 0 ? d : this.data.duration;
  };

  Clip.prototype.bind = function () {
    var self = this;
    var audio = this.audio;
    this.playButton.addEventListener("click", function () { self.select(); self.toggle(); });
    this.canvas.addEventListener("click", function (event) {
      var rect = self.canvas.getBoundingClientRect();
      self.select();
      self.seekTo(((event.clientX - rect.left) / rect.width) * self.duration());
    });
    this.canvas.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !self.textarea.readOnly) { event.preventDefault(); self.textarea.focus(); }
    });
    this.section.addEventListener("focusin", function () { self.select(); });
    audio.addEventListener("play", function () {
      clips.forEach(function (other) { if (other !== self) other.audio.pause(); });
      self.playButton.classList.add("playing");
      self.playButton.setAttribute("aria-label", "Pause clip " + self.data.number);
      self.playButton.firstElementChild.textContent = "❚❚";
      self.lastTime = audio.currentTime;
      self.animate();
    });
    audio.addEventListener("pause", function () {
      self.playButton.classList.remove("playing");
      self.playButton.setAttribute("aria-label", "Play clip " + self.data.number);
      self.playButton.firstElementChild.textContent = "▶";
      self.draw();
    });
    audio.addEventListener("seeking", function () { self.lastTime = audio.currentTime; });
    audio.addEventListener("timeupdate", function () { self.progress(audio.currentTime); });
    audio.addEventListener("ended", function () { self.progress(self.duration()); });
    audio.addEventListener("loadedmetadata", function () { self.draw(); });
    audio.addEventListener("error", function () {
      self.time.textContent = "audio failed";
      self.time.title = "The audio did not load. Reload the page, or report the clip below.";
    });
    this.textarea.addEventListener("input", function () { self.validate(); });
    this.textarea.addEventListener("blur", function () {
      if (self.textarea.value.trim() !== "") { self.touched = true; self.validate(); }
    });
    if (this.videoButton) this.videoButton.addEventListener("click", function () { self.openVideo(); });
  };

  Clip.prototype.select = function () {
    if (current === this) return;
    if (current) current.section.classList.remove("current");
    current = this;
    this.section.classList.add("current");
  };

  Clip.prototype.toggle = function () {
    if (this.audio.paused) {
      var playing = this.audio.play();
      if (playing && playing.catch) playing.catch(function () { /* interrupted by pause */ });
    } else {
      this.audio.pause();
    }
  };

  Clip.prototype.replay = function () {
    this.seekTo(0);
    if (this.audio.paused) this.toggle();
  };

  Clip.prototype.seekTo = function (seconds) {
    var d = this.duration();
    this.audio.currentTime = Math.min(Math.max(0, seconds), Math.max(0, d - 0.01));
    this.lastTime = this.audio.currentTime;
    this.draw();
  };

  // Marks what was heard since the last update: played in order, no jump (a seek resets
  // lastTime, so skipping ahead never counts as hearing).
  Clip.prototype.progress = function (now) {
    var d = this.duration();
    var step = now - this.lastTime;
    if (!this.audio.seeking && step >= 0 && step <= 1 + this.audio.playbackRate && d > 0) {
      var from = Math.floor((this.lastTime / d) * BUCKETS);
      var to = Math.min(BUCKETS, Math.ceil((now / d) * BUCKETS));
      for (var i = from; i < to; i++) this.covered[i] = 1;
    }
    this.lastTime = now;
    if (!this.heard) {
      var sum = 0;
      for (var j = 0; j < BUCKETS; j++) sum += this.covered[j];
      if (sum >= HEARD_SHARE * BUCKETS) this.markHeard();
    }
    this.draw();
  };

  Clip.prototype.markHeard = function () {
    var self = this;
    this.heard = true;
    this.unlock();
    var logged = function () { self.heardState.dataset.logged = "1"; };
    post(this.data.heard_url).then(logged, function () {
      // one retry; the box stays unlocked on this page either way
      setTimeout(function () { post(self.data.heard_url).then(logged, function () {}); }, 2000);
    });
    var active = document.activeElement;
    if (!active || active.tagName !== "TEXTAREA") this.textarea.focus();
  };

  Clip.prototype.unlock = function () {
    if (!form.dataset.editable) return;
    this.textarea.readOnly = false;
    this.box.classList.remove("locked");
    this.lock.hidden = true;
    this.heardState.textContent = "Heard in full";
    this.heardState.classList.add("yes");
    this.validate();
  };

  Clip.prototype.resize = function () {
    var ratio = window.devicePixelRatio || 1;
    var width = Math.max(1, Math.round(this.canvas.clientWidth * ratio));
    var height = Math.max(1, Math.round(this.canvas.clientHeight * ratio));
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
    this.draw();
  };

  Clip.prototype.draw = function () {
    var canvas = this.canvas;
    var ctx = canvas.getContext("2d");
    var w = canvas.width, h = canvas.height;
    var ratio = window.devicePixelRatio || 1;
    var peaks = this.data.peaks || [];
    var d = this.duration();
    var t = this.audio.currentTime || 0;
    var played = d > 0 ? t / d : 0;
    var bar = 3 * ratio, gap = 1 * ratio;
    var bars = Math.max(1, Math.floor(w / (bar + gap)));
    var middle = (h - 4 * ratio) / 2;
    ctx.clearRect(0, 0, w, h);
    for (var i = 0; i < bars; i++) {
      var peak = 0;
      if (peaks.length) {
        var a = Math.floor((i / bars) * peaks.length);
        var b = Math.max(a + 1, Math.floor(((i + 1) / bars) * peaks.length));
        for (var k = a; k < b && k < peaks.length; k++) peak = Math.max(peak, peaks[k]);
      }
      var half = Math.max(ratio, peak * (middle - ratio));
      ctx.fillStyle = i / bars < played ? "#0969da" : "#b6c2cf";
      ctx.fillRect(i * (bar + gap), middle - half, bar, half * 2);
    }
    // what has been heard, as a strip along the bottom
    ctx.fillStyle = "#1a7f37";
    for (var j = 0; j < BUCKETS; j++) {
      if (this.covered[j] || this.heard) ctx.fillRect((j / BUCKETS) * w, h - 3 * ratio, w / BUCKETS + 1, 3 * ratio);
    }
    ctx.fillStyle = "#1d232a";
    ctx.fillRect(Math.min(w - ratio, played * w), 0, ratio * 1.5, h - 4 * ratio);
    this.time.textContent = clock(t) + " / " + clock(d);
    this.canvas.setAttribute("aria-valuenow", Math.round(t));
    this.canvas.setAttribute("aria-valuemax", Math.round(d));
    this.canvas.setAttribute("aria-valuetext", clock(t) + " of " + clock(d));
  };

  Clip.prototype.animate = function () {
    var self = this;
    if (this.frame) return;
    var step = function () {
      self.frame = null;
      self.draw();
      if (!self.audio.paused) self.frame = requestAnimationFrame(step);
    };
    this.frame = requestAnimationFrame(step);
  };

  Clip.prototype.openVideo = function () {
    var self = this;
    if (!this.data.video_open_url) return;
    this.videoButton.disabled = true;
    post(this.data.video_open_url).then(function (body) {
      var video = self.video;
      video.muted = true;
      video.addEventListener("volumechange", function () { if (!video.muted) video.muted = true; });
      if (!video.src) { video.preload = "auto"; video.src = body.video_url; }
      video.hidden = false;
      self.videoButton.textContent = "Video hint opened (reviewers see this)";
      self.videoButton.dataset.opened = "1";
    }, function (error) {
      self.videoButton.disabled = false;
      self.videoButton.textContent = "Video hint failed: " + error.message + " (try again)";
    });
  };

  // Checks ------------------------------------------------------------------------------

  Clip.prototype.validate = function () {
    var text = Rules.trim(this.textarea.value, table);
    var self = this;
    var problems = Rules.check(text, table);
    var words = text ? Rules.wordCount(text, table) : 0;
    var limits = table.limits;
    this.errors = problems.filter(function (p) { return p.level === "error"; });
    // "too short" and "empty" only once the worker has left the box or tried to submit
    var shown = problems.filter(function (p) {
      return self.touched || (p.code !== "empty" && p.code !== "min_words" && p.level === "error");
    });
    var list = this.checks;
    while (list.firstChild) list.removeChild(list.firstChild);
    shown.forEach(function (p) {
      var item = document.createElement("li");
      item.className = p.level;
      item.dataset.code = p.code;
      item.textContent = "The caption for clip " + self.data.number + " " + p.message + ".";
      list.appendChild(item);
    });
    this.count.textContent = words + " / " + limits.min_words + "–" + limits.max_words + " words";
    this.count.classList.toggle("off", words > limits.max_words || (this.touched && words < limits.min_words));
    this.box.classList.toggle("invalid", this.errors.length > 0 && (this.touched || text !== ""));
    this.box.classList.toggle("valid", this.errors.length === 0);
    updateReady();
  };

  Clip.prototype.ready = function () { return this.heard && this.errors.length === 0; };

  function updateReady() {
    if (!readyText || clips.length < hit.clips.length) return;
    var ready = clips.filter(function (c) { return c.ready(); }).length;
    readyText.textContent = ready + " of " + clips.length + " caption" + (clips.length === 1 ? "" : "s") + " ready";
  }

  form.addEventListener("submit", function (event) {
    if (submitting) { event.preventDefault(); return; }
    var first = null;
    clips.forEach(function (clip) {
      clip.touched = true;
      clip.validate();
      if (!clip.heard) {
        var item = document.createElement("li");
        item.className = "error";
        item.textContent = "Listen to clip " + clip.data.number + " to the end first.";
        clip.checks.insertBefore(item, clip.checks.firstChild);
      }
      if (!first && !clip.ready()) first = clip;
    });
    if (first) {
      event.preventDefault();
      first.select();
      (first.textarea.readOnly ? first.canvas : first.textarea).focus();
      first.section.scrollIntoView({ block: "nearest" });
      return;
    }
    submitting = true;
    clips.forEach(function (clip) { clip.audio.pause(); });
    if (submitButton) { submitButton.disabled = true; submitButton.textContent = "Submitting…"; }
  });

  // Keyboard ----------------------------------------------------------------------------

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
      (target.tagName === "INPUT" && target.type !== "radio" && target.type !== "checkbox"));
  }

  function activates(target) {
    return target && (target.tagName === "BUTTON" || target.tagName === "SUMMARY" || target.tagName === "A" ||
      target.tagName === "INPUT");
  }

  document.addEventListener("keydown", function (event) {
    var clip = current || clips[0];
    if (!clip) return;
    var target = event.target;
    if (typing(target)) {
      // only with a modifier, so typing is never interrupted
      if (event.altKey && event.code === "KeyP") { event.preventDefault(); clip.toggle(); }
      else if (event.altKey && event.code === "KeyR") { event.preventDefault(); clip.replay(); }
      else if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
        event.preventDefault();
        if (submitButton) submitButton.click();
      } else if (event.key === "Escape") { target.blur(); clip.canvas.focus(); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === " " || event.key === "Spacebar") {
      if (activates(target)) return; // Space presses the focused button
      event.preventDefault();
      clip.toggle();
    } else if (event.key === "r" || event.key === "R") {
      clip.replay();
    } else if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      event.preventDefault();
      clip.seekTo(clip.audio.currentTime + (event.key === "ArrowLeft" ? -SEEK_SECONDS : SEEK_SECONDS));
    } else if (event.key === "v" || event.key === "V") {
      if (clip.videoButton && !clip.videoButton.dataset.opened) clip.openVideo();
    } else if (event.key === "?") {
      instructions.open = !instructions.open;
    } else if (event.key === "Enter" && !activates(target) && !clip.textarea.readOnly) {
      event.preventDefault();
      clip.textarea.focus();
    } else if (/^[1-9]$/.test(event.key) && clips[Number(event.key) - 1]) {
      var chosen = clips[Number(event.key) - 1];
      chosen.select();
      chosen.canvas.focus();
      chosen.section.scrollIntoView({ block: "nearest" });
    }
  });

  // Hints: the definition also shows on tap (touch screens have no hover)
  Array.prototype.forEach.call(document.querySelectorAll("button.hint"), function (button) {
    button.addEventListener("click", function () { button.nextElementSibling.classList.toggle("shown"); });
    button.addEventListener("blur", function () { button.nextElementSibling.classList.remove("shown"); });
  });

  // The deadline, counted down once a second while less than ten minutes are left
  var deadline = document.querySelector("[data-deadline]");
  if (deadline) {
    var due = new Date(deadline.dataset.deadline).getTime();
    var tick = function () {
      var left = (due - Date.now()) / 1000;
      if (left <= 0) { deadline.textContent = "time is up"; deadline.classList.add("error-line"); return; }
      deadline.textContent = (left < 600 ? clock(left) : Math.round(left / 60) + " min") + " left";
      setTimeout(tick, left < 600 ? 1000 : 30000);
    };
    tick();
  }

  // Start -------------------------------------------------------------------------------

  form.dataset.editable = submitButton ? "1" : "";
  Array.prototype.forEach.call(form.querySelectorAll("section.clip"), function (section, index) {
    clips.push(new Clip(section, hit.clips[index]));
  });
  updateReady();
  window.addEventListener("resize", function () { clips.forEach(function (c) { c.resize(); }); });
  if (clips.length) {
    clips[0].select();
    // keyboard-first: Space plays the first clip at once
    if (!document.activeElement || document.activeElement === document.body) clips[0].canvas.focus({ preventScroll: true });
  }
  window.EarmarkHit = { clips: clips };
})();
