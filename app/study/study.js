/* study mode: clicks inside the views that have no logging callback of their own yet
   (attribution, nearest contexts, compare, state forcing) are posted to /study/event;
   the banner counts them as saved once the server acknowledged them */
(function () {
    var PANELS = "#attribution-panel, #nearest-panel, #compare-panel, #forcing-panel";
    document.addEventListener("click", function (ev) {
        // the server knows the participant from this page's link (same-origin Referer)
        // or its cookie, never from the body
        var m = window.location.pathname.match(/^\/p\/([A-Za-z0-9_-]{16,64})\/?$/);
        var panel = m && ev.target.closest && ev.target.closest(PANELS);
        if (!panel) { return; }
        var el = ev.target.closest("[id], button, a, input, label") || ev.target;
        var body = {kind: "view_clicked", payload: {
            view: panel.id.replace(/-panel$/, ""), target: el.id || el.tagName.toLowerCase(),
            text: (el.innerText || el.value || "").slice(0, 80)}};
        fetch("/study/event", {method: "POST", body: JSON.stringify(body),
                               headers: {"Content-Type": "application/json"}})
            .then(function (r) { return r.ok ? r.json() : null; })
            .then(function (b) {
                if (!b || !b.ok) { return; }
                window.__studySaved = (window.__studySaved || 0) + b.ids.length;
                var s = document.getElementById("study-saved");
                if (s) { s.textContent = "✓ " + window.__studySaved + " interactions saved"; }
            })
            .catch(function () { /* not acknowledged: not counted as saved */ });
    }, true);
})();
