// The inspector's only script: asks before a forget form is sent. Plain JS, no network.
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (form.classList && form.classList.contains("confirm") &&
      !window.confirm("Forget this memory? The forgetting is logged and cannot be undone.")) {
    event.preventDefault();
  }
});
