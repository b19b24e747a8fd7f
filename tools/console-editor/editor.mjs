// The console's code editor: CodeMirror 6 with Python, JavaScript and shell
// highlighting. Bundled by scripts/build-console-editor.sh into
// src/api/console/editor.js (an IIFE, no module loader), which defines
//
//   window.AirlockEditor.mount(textarea, language) -> {getCode(), setCode(text), setLanguage(name), view}
//
// mount() hides the textarea and puts the editor after it, inside a shadow
// root; app.js falls back to the textarea when this script is missing.
// Why the shadow root: CodeMirror's styles (style-mod) go into a <style>
// element when the editor lives in the document, which the console's
// Content-Security-Policy (style-src 'self', no 'unsafe-inline') refuses; in
// a shadow root they are constructable stylesheets (adoptedStyleSheets) and
// element.style, CSSOM that the policy allows. No CSP exception is needed.
import { EditorView, basicSetup } from "codemirror";
import { Compartment, EditorState } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { StreamLanguage } from "@codemirror/language";
import { python } from "@codemirror/lang-python";
import { javascript } from "@codemirror/lang-javascript";
import { shell } from "@codemirror/legacy-modes/mode/shell";

function languageSupport(name) {
  if (name === "javascript") return javascript();
  if (name === "bash") return StreamLanguage.define(shell);
  return python();
}

const look = EditorView.theme({
  "&": { border: "1px solid #d8dde3", fontSize: "0.9rem", maxHeight: "28rem", backgroundColor: "#fff" },
  ".cm-scroller": { fontFamily: "ui-monospace, monospace", minHeight: "12rem" },
});

function mount(textarea, language) {
  const lang = new Compartment();
  const host = document.createElement("div");
  host.id = "editor";
  const shadow = host.attachShadow({ mode: "open" });
  textarea.hidden = true;
  textarea.insertAdjacentElement("afterend", host);
  const view = new EditorView({
    root: shadow,
    parent: shadow,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        basicSetup,
        keymap.of([indentWithTab]),
        lang.of(languageSupport(language)),
        EditorState.tabSize.of(4),
        look,
        EditorView.contentAttributes.of({ "aria-label": "code", "data-testid": "editor" }),
      ],
    }),
  });
  return {
    view,
    getCode: () => view.state.doc.toString(),
    setCode: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    setLanguage: (name) => view.dispatch({ effects: lang.reconfigure(languageSupport(name)) }),
  };
}

window.AirlockEditor = { mount };
