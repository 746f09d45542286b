// The operator console's one script: progressive enhancement only — every
// page works without it. It keeps regions marked `data-live` current: a
// server-sent event from /console/live says something changed, and the
// region's own URL (with `fragment=1`) is fetched again and swapped in. When
// the event stream is unavailable it polls every five seconds instead. A
// region is not swapped while focus or a text selection is inside it, and
// the scroll of its scroll boxes (the graph) is kept across a swap. Times
// are shown in UTC, as on every page. Ids get a "Copy" button.
(function () {
  "use strict";
  // A "Copy" button after each `data-copy` element (ids, revisions, keys):
  // the clipboard when the browser offers it, else the text is selected.
  function copyButtons(root) {
    Array.prototype.forEach.call(root.querySelectorAll("[data-copy]"), function (target) {
      if (target.nextElementSibling && target.nextElementSibling.classList.contains("copy")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy secondary";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy " + target.textContent.trim());
      button.addEventListener("click", function () {
        var text = target.textContent.trim();
        var done = function () { button.textContent = "Copied"; };
        var select = function () {
          var range = document.createRange();
          range.selectNodeContents(target);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          button.textContent = "Selected: copy with Ctrl+C";
        };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(text).then(done, select);
        } else {
          select();
        }
      });
      target.insertAdjacentElement("afterend", button);
    });
  }
  copyButtons(document);
  var regions = Array.prototype.slice.call(document.querySelectorAll("[data-live]"));
  if (regions.length === 0) { return; }
  var status = document.querySelector(".live-status");
  var pending = false;
  function say(text) { if (status) { status.textContent = text; } }
  function busy(region) {
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) { return true; }
    var selection = window.getSelection && window.getSelection();
    return !!(selection && !selection.isCollapsed && region.contains(selection.anchorNode));
  }
  function refresh() {
    if (pending || document.hidden) { return; }
    pending = true;
    Promise.all(regions.map(function (region) {
      if (busy(region)) { return Promise.resolve(); }
      var url = new URL(region.getAttribute("data-live"), window.location.href);
      url.searchParams.set("fragment", "1");
      return fetch(url.toString(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (response) {
          if (response.redirected || !response.ok) { throw new Error("status " + response.status); }
          return response.text();
        })
        .then(function (html) {
          var boxes = region.querySelectorAll(".graph");
          var kept = Array.prototype.map.call(boxes, function (box) { return [box.scrollLeft, box.scrollTop]; });
          region.innerHTML = html;
          copyButtons(region);
          Array.prototype.forEach.call(region.querySelectorAll(".graph"), function (box, i) {
            if (kept[i]) { box.scrollLeft = kept[i][0]; box.scrollTop = kept[i][1]; }
          });
        });
    })).then(function () {
      say("Updated " + new Date().toISOString().slice(11, 19) + " UTC");
    }, function () {
      say("Could not update; showing the last state");
    }).then(function () { pending = false; });
  }
  var polling = null;
  function poll() { if (!polling) { polling = window.setInterval(refresh, 5000); say("Updating every 5 s"); } }
  if (window.EventSource) {
    var source = new EventSource("/console/live");
    source.addEventListener("changed", refresh);
    source.addEventListener("open", function () {
      if (polling) { window.clearInterval(polling); polling = null; }
      say("Live");
    });
    source.addEventListener("error", function () { poll(); });
  } else {
    poll();
  }
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
})();
