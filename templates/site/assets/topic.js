/* A topic's own page (papers/topic/<topic>.html) names its months; each paper's entry is on
   its topic's page of its month. A link made before the months were split (a feed reader's
   copy of papers.xml, a bookmark) names the topic's page and the paper's anchor (#p-…): this
   finds the paper in the search index (search-index.js, then the file of each year, the year
   an arXiv id names first, by script tags so it works from file://) and goes to its page,
   anchor kept (a seed entry's anchor becomes its paper's, once found: the index's "moved").
   Without JavaScript, or for a paper the index lacks, the months show. */
(function () {
  "use strict";
  var id = decodeURIComponent(location.hash.slice(1));
  if (id.indexOf("p-") !== 0 || document.getElementById(id)) return;
  var root = document.currentScript.src.replace(/assets\/[^\/]*$/, ""), seen = 0;
  function load(file, then) {
    var script = document.createElement("script");
    script.src = root + file;
    script.onload = script.onerror = then;
    document.head.appendChild(script);
  }
  load("search-index.js", function () {
    var data = window.RL_DIGEST_INDEX, guess = /^p-arxiv-(\d\d)\d\d\./.exec(id);
    if (!data) return;
    id = (data.moved || {})[id] || id;  /* a seed entry's, its paper since found */
    var first = guess ? "20" + guess[1] : "";
    var years = data.years.filter(function (y) { return y === first; })
      .concat(data.years.filter(function (y) { return y !== first; }));
    (function next() {
      for (; seen < data.papers.length; seen++) {
        var p = data.papers[seen];
        if (p[0] === id) return location.replace(root + data.topics[p[6]][p[7] || "undated"] + "#" + id);
      }
      if (years.length) load("search-index-" + years.shift() + ".js", next);
    })();
  });
})();
