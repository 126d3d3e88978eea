// Offers the browser's own time zone in the "Times in" selector, marked as such. The pages work
// without it: the selector lists common zones and the choice is kept in a cookie by the server.
(function () {
  "use strict";
  function offer() {
    var select = document.getElementById("tz");
    if (!select || select.dataset.offered) return;
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
    if (!zone) return;
    select.dataset.offered = "1";
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === zone || select.options[i].text === zone) {
        select.options[i].text = zone + " (this browser)";
        select.options[i].value = zone;
        return;
      }
    }
    var opt = document.createElement("option");
    opt.value = zone;
    opt.text = zone + " (this browser)";
    select.insertBefore(opt, select.firstChild);
  }
  document.addEventListener("DOMContentLoaded", offer);
  document.addEventListener("htmx:afterSettle", offer);
})();
