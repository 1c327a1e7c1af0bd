/* The reading list's search (papers/index.html): plain JavaScript over window.RL_DIGEST_INDEX
   (search-index.js: each topic's page of each month; search-index-<year>.js: papers as
   [anchor, title, Chinese title, Chinese summary, English summary, authors, topic, month
   (YYYY-MM)]; a paper's page is its topic's page of its month, "undated" for none). Each summary shows tagged with its language, for the zh / en switch.
   Every word typed (words part at spaces, commas, the ideographic comma and semicolons)
   must appear in a paper's title, Chinese title, summaries or authors, or be its arXiv id
   (2611.00001, arXiv:2611.00001, its abs or pdf URL, with a version or not);
   the topic and year filters narrow further; case and accents do not matter ("ropke" finds
   Röpke, as relevance.follow_authors does). No framework, nothing fetched. */
(function () {
  "use strict";
  var order = (document.documentElement.getAttribute("data-langs") || "zh en").split(" ");
  var data = window.RL_DIGEST_INDEX || {papers: [], topics: {}};
  var q = document.getElementById("q"), topic = document.getElementById("topic"),
      year = document.getElementById("year"), list = document.getElementById("results"),
      found = document.getElementById("found"), count = document.getElementById("hits");
  if (!q || !list) return;
  var LIMIT = Number(list.getAttribute("data-limit")) || 200;  /* the page says the same number */
  /* Letters NFKD leaves whole; the same table as pipeline/learn.py's author_name. */
  var BARE = {"ø": "o", "ł": "l", "đ": "d", "ð": "d", "ı": "i", "ß": "ss", "æ": "ae", "œ": "oe", "þ": "th"};
  function fold(text) {
    return text.toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
      .replace(/[øłđðıßæœþ]/g, function (c) { return BARE[c]; });
  }
  /* Between two words: spaces, commas, the ideographic comma and semicolons, ASCII or
     full-width (a Chinese query joins its words with a full-width comma), written as escapes
     so that an English-only site holds no Chinese character; not . : / or -, which an arXiv
     id, its URL or a hyphenated word holds. */
  var SEPARATORS = /[\s,\uff0c\u3001;\uff1b]+/;
  var ARXIV_ID = /^(?:arxiv:|https?:\/\/(?:www\.)?arxiv\.org\/(?:abs|pdf)\/)?(\d{4}\.\d{4,5})(?:v\d+)?$/;
  var haystacks = data.papers.map(function (p) {
    return fold(p[1] + "\n" + p[2] + "\n" + p[3] + "\n" + p[4] + "\n" + p[5]);
  });

  function show() {
    var words = fold(q.value).split(SEPARATORS).filter(Boolean), ids = {};
    words.forEach(function (w) {  /* an id is matched whole: "2" is in every paper's id */
      var id = ARXIV_ID.exec(w);
      if (id) ids[w] = "p-arxiv-" + id[1];
    });
    var t = topic.value, y = year.value;
    list.textContent = "";
    found.hidden = !words.length && !t && !y;
    if (found.hidden) return;
    var hits = 0;
    for (var i = 0; i < data.papers.length; i++) {
      var p = data.papers[i];
      if ((t && p[6] !== t) || (y && (p[7].slice(0, 4) || "undated") !== y)) continue;
      if (!words.every(function (w) { return haystacks[i].indexOf(w) !== -1 || ids[w] === p[0]; })) continue;
      hits++;
      if (hits > LIMIT) continue;
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = "../" + data.topics[p[6]][p[7] || "undated"] + "#" + p[0];
      a.textContent = p[1];
      a.lang = "en";  /* an arXiv title, on a page that may be zh-CN: read in the right voice */
      li.appendChild(a);
      if (p[2]) { var zh = document.createElement("span"); zh.lang = "zh-CN"; zh.setAttribute("data-l", "zh"); zh.textContent = " · " + p[2]; li.appendChild(zh); }
      order.forEach(function (lang) {
        var text = lang === "zh" ? p[3] : p[4];
        if (!text) return;
        var line = document.createElement("div");
        line.className = "snippet";
        line.lang = lang === "zh" ? "zh-CN" : "en";
        line.setAttribute("data-l", lang);
        line.textContent = text;
        li.appendChild(line);
      });
      var meta = document.createElement("div");
      meta.className = "meta";
      var names = p[5].split(", ");  /* six and "et al.", as the paper's own entry names them */
      meta.textContent = [p[7].slice(0, 4), names.length > 6 ? names.slice(0, 6).join(", ") + " et al." : p[5]]
        .filter(Boolean).join(" · ");
      li.appendChild(meta);
      list.appendChild(li);
    }
    count.textContent = String(hits);
    document.getElementById("one").hidden = hits !== 1;  /* "1 paper", "2 papers" */
    document.getElementById("many").hidden = hits === 1;
    document.getElementById("capped").hidden = hits <= LIMIT;  /* never a silent cut */
  }

  /* Enter lists as typing does; no inline handler, which serve's Content-Security-Policy refuses. */
  document.getElementById("search").addEventListener("submit", function (event) { event.preventDefault(); });
  q.addEventListener("input", show);
  topic.addEventListener("change", show);
  year.addEventListener("change", show);
  var asked = new URLSearchParams(location.search);  /* papers/index.html?q=grpo&topic=agentic&year=2026 */
  q.value = asked.get("q") || q.value;
  topic.value = asked.get("topic") || topic.value;
  year.value = asked.get("year") || year.value;
  show();
})();
