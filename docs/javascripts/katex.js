// Render the maths that pymdownx.arithmatex (generic mode) wraps in `.arithmatex` as \( \) and
// \[ \], on every page load, including Material's instant navigation. Nothing else on a page is
// read as maths, so a dollar sign in prose stays a dollar sign.
function renderMaths() {
  for (const element of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  }
}
if (typeof document$ !== "undefined") {
  document$.subscribe(renderMaths);
} else {
  document.addEventListener("DOMContentLoaded", renderMaths);
}
