/* The web edition's zh / en / both switch. The reader's choice is kept in localStorage and
   applied before the page is drawn; without JavaScript both languages show. */
(function () {
  "use strict";
  var KEY = "rl-digest-language";
  var root = document.documentElement;
  var shown = (root.getAttribute("data-langs") || "").split(" ");
  /* the page's language follows the choice, so a screen reader voices what is left untagged
     (names, counts, punctuation) in it; the tags are labels.j2's */
  var TAGS = {zh: "zh-CN", en: "en", both: root.getAttribute("lang")};
  if (shown.indexOf("zh") < 0 || shown.indexOf("en") < 0) {
    return; /* one language: nothing to switch */
  }

  function stored() {
    try {
      return window.localStorage.getItem(KEY);
    } catch (e) {
      return null; /* storage off (a private window, a strict file:// policy) */
    }
  }

  function show(choice) {
    if (choice !== "zh" && choice !== "en") {
      choice = "both";
    }
    root.setAttribute("data-show", choice);
    root.setAttribute("lang", TAGS[choice]);
    /* Options and placeholders hold plain text: swap it (the text for both is kept aside). */
    var plain = document.querySelectorAll("[data-zh][data-en]");
    for (var j = 0; j < plain.length; j++) {
      var node = plain[j], field = node.tagName === "INPUT" ? "placeholder" : "textContent";
      if (!node.hasAttribute("data-both")) {
        node.setAttribute("data-both", node[field]);
      }
      node[field] = node.getAttribute("data-" + choice);
    }
    var buttons = document.querySelectorAll("[data-choose]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-pressed", String(buttons[i].getAttribute("data-choose") === choice));
    }
  }

  show(stored());
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.querySelector(".langs");
    if (!box) {
      return;
    }
    box.hidden = false;
    show(root.getAttribute("data-show"));
    box.addEventListener("click", function (event) {
      var button = event.target.closest("[data-choose]");
      if (!button) {
        return;
      }
      var choice = button.getAttribute("data-choose");
      try {
        window.localStorage.setItem(KEY, choice);
      } catch (e) { /* the choice then lasts this page only */ }
      show(choice);
    });
  });
})();
