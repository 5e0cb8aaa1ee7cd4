// The caption rules of annotation/rules.py, run in the browser. The table (rules, limits,
// trim characters, word pattern) comes from the server as JSON; this file only knows how
// to apply it, exactly as rules.check() does, so both give the same messages.
(function (global) {
  "use strict";

  var PLACEHOLDER = /\{(\w+)\}/g;

  // 102400 -> "102,400", as Python's f"{n:,}" (toLocaleString is slow on every keystroke)
  function thousands(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }

  function words(n) { return thousands(n) + (n === 1 ? " word" : " words"); }

  function format(message, values) {
    return message.replace(PLACEHOLDER, function (whole, key) {
      return Object.prototype.hasOwnProperty.call(values, key) ? values[key] : whole;
    });
  }

  function codepoint(text) {
    if (!text) return "";
    var hex = text.codePointAt(0).toString(16).toUpperCase();
    while (hex.length < 4) hex = "0" + hex;
    return "U+" + hex;
  }

  function compile(table) {
    if (table.compiled) return table.compiled;
    var escaped = table.trim.replace(/[\\\]^-]/g, "\\$&");
    var compiled = {
      trim: new RegExp("^[" + escaped + "]+|[" + escaped + "]+$", "g"),
      word: new RegExp(table.word_pattern, "g"),
      patterns: {},
    };
    table.rules.forEach(function (rule) {
      if (rule.pattern) compiled.patterns[rule.code] = new RegExp(rule.pattern, rule.ignore_case ? "i" : "");
    });
    table.compiled = compiled;
    return compiled;
  }

  function byCode(table, code) {
    for (var i = 0; i < table.rules.length; i++) if (table.rules[i].code === code) return table.rules[i];
    throw new Error("no caption rule " + code);
  }

  function problem(rule, values) {
    return { code: rule.code, level: rule.level, message: format(rule.message, values) };
  }

  function trim(text, table) { return text.replace(compile(table).trim, ""); }

  function wordCount(text, table) {
    var found = text.match(compile(table).word);
    return found ? found.length : 0;
  }

  // Every rule the trimmed text breaks, in table order (as rules.check).
  function check(text, table) {
    var limits = table.limits;
    var compiled = compile(table);
    var values = {
      min_words: thousands(limits.min_words),
      max_words: thousands(limits.max_words),
      max_chars: thousands(limits.max_chars),
    };
    if (!text) return [problem(byCode(table, "empty"), values)];
    var length = Array.from(text).length; // code points, as Python's len()
    if (length > limits.max_chars) {
      values.chars = thousands(length);
      return [problem(byCode(table, "max_chars"), values)];
    }
    var count = wordCount(text, table);
    values.words = words(count);
    var problems = [];
    table.rules.forEach(function (rule) {
      if (rule.check === "min_words" && count < limits.min_words) {
        problems.push(problem(rule, values));
      } else if (rule.check === "max_words" && count > limits.max_words) {
        problems.push(problem(rule, values));
      } else if (rule.check === "found" || rule.check === "missing") {
        var match = compiled.patterns[rule.code].exec(text);
        if (rule.check === "missing" && match === null) {
          problems.push(problem(rule, values));
        } else if (rule.check === "found" && match !== null) {
          var found = match[1] ? match[1] : match[0];
          var own = Object.assign({}, values, { found: found, codepoint: codepoint(found) });
          problems.push(problem(rule, own));
        }
      }
    });
    return problems;
  }

  global.EarmarkCaptionRules = { check: check, trim: trim, wordCount: wordCount };
})(window);
