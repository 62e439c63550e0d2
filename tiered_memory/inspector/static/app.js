// The inspector's only script: asks before a forget or delete form is sent. Plain JS, no network.
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!form.classList || !form.classList.contains("confirm")) {
    return;
  }
  var question = form.getAttribute("data-confirm") ||
    "Forget this memory? The forgetting is logged and cannot be undone.";
  if (!window.confirm(question)) {
    event.preventDefault();
  }
});
