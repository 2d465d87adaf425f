// Tickwork console: the script editor (CodeMirror 6) of a glue job's page. It enhances the
// page's textarea (`textarea[data-editor]`), which stays the form's field: without JavaScript
// the page posts the textarea as it is; with it, the editor writes its text back on submit.
// Bundled with esbuild by tickwork-admin's build script; no inline script, no foreign origin.
//
// The editor lives in a shadow root: there CodeMirror adds its styles as constructed style
// sheets, whereas in the document it would add <style> elements, which the console's CSP
// (style-src 'self') refuses.

import { EditorState, EditorSelection } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection
} from "@codemirror/view";
import {
  defaultKeymap, history, historyKeymap, indentLess, indentMore
} from "@codemirror/commands";
import {
  indentUnit, indentOnInput, bracketMatching, foldGutter, foldKeymap, syntaxHighlighting,
  defaultHighlightStyle, StreamLanguage
} from "@codemirror/language";
import { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
import { python } from "@codemirror/lang-python";
import { javascript } from "@codemirror/lang-javascript";
import { php } from "@codemirror/lang-php";
import { java } from "@codemirror/lang-java";
import { shell } from "@codemirror/legacy-modes/mode/shell";
import { powerShell } from "@codemirror/legacy-modes/mode/powershell";

const UNIT = "    ";

// The language of each glue type (GLUE_GROOVY sources are Java classes).
function language(glue) {
  switch (glue) {
    case "GLUE_SHELL": return StreamLanguage.define(shell);
    case "GLUE_PYTHON":
    case "GLUE_PYTHON2": return python();
    case "GLUE_PHP": return php();
    case "GLUE_NODEJS": return javascript();
    case "GLUE_POWERSHELL": return StreamLanguage.define(powerShell);
    case "GLUE_GROOVY": return java();
    default: return [];
  }
}

// The editor's own words in Chinese (its search panel, folding and go-to-line).
const ZH = {
  "Find": "查找", "Replace": "替换", "next": "下一个", "previous": "上一个", "all": "全部",
  "match case": "区分大小写", "regexp": "正则表达式", "by word": "全词匹配",
  "replace": "替换", "replace all": "全部替换", "close": "关闭",
  "replaced $ matches": "已替换 $ 处", "replaced match on line $": "已替换第 $ 行的匹配",
  "on line": "在行", "current match": "当前匹配", "Go to line": "跳到行", "go": "跳转",
  "Fold line": "折叠", "Unfold line": "展开", "folded code": "已折叠的代码", "unfold": "展开",
  "Control character": "控制字符", "Editor": "编辑器"
};

// Tab: with no selection, spaces up to the next indentation column at the cursor; with a
// selection, the selected lines one level deeper. Shift-Tab: the lines one level shallower.
// Escape then Tab still moves the focus on (CodeMirror's tab focus mode), so keyboard users
// are never trapped.
function tab(view) {
  const { state } = view;
  if (state.readOnly) return false;
  if (state.selection.ranges.some((r) => !r.empty)) return indentMore(view);
  view.dispatch(state.update(state.changeByRange((r) => {
    const col = r.head - state.doc.lineAt(r.head).from;
    const pad = UNIT.slice(col % UNIT.length);
    return {
      changes: { from: r.head, insert: pad },
      range: EditorSelection.cursor(r.head + pad.length)
    };
  }), { scrollIntoView: true, userEvent: "input" }));
  return true;
}

// The editor's looks, matching the console's form fields (console.css cannot reach inside
// the shadow root; it styles the host, #script-editor).
const look = EditorView.theme({
  "&": { backgroundColor: "#fbfbfd", borderRadius: "6px" },
  "&.cm-focused": { outline: "none" },
  ".cm-scroller": {
    minHeight: "16rem", maxHeight: "36rem",
    fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace', fontSize: "13.5px"
  },
  ".cm-gutters": { backgroundColor: "#f0f2f5", color: "#6b7280", borderRight: "1px solid #e2e5ea" },
  ".cm-activeLine": { backgroundColor: "#eef3fd" },
  ".cm-activeLineGutter": { backgroundColor: "#dfe8fa" }
});

function enhance(area) {
  const readOnly = area.readOnly;
  const zh = (document.documentElement.lang || "").indexOf("zh") === 0;
  const host = document.createElement("div");
  host.id = "script-editor";
  host.className = "script-editor";
  const root = host.attachShadow({ mode: "open" });
  const view = new EditorView({
    root,
    parent: root,
    state: EditorState.create({
      doc: area.value,
      extensions: [
        lineNumbers(),
        highlightActiveLineGutter(),
        highlightSpecialChars(),
        history(),
        foldGutter(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        highlightSelectionMatches(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        indentUnit.of(UNIT),
        EditorState.tabSize.of(4),
        language(area.getAttribute("data-glue")),
        zh ? EditorState.phrases.of(ZH) : [],
        EditorState.readOnly.of(readOnly),
        EditorView.editable.of(!readOnly),
        keymap.of([
          { key: "Tab", run: tab, shift: indentLess },
          ...defaultKeymap, ...historyKeymap, ...foldKeymap, ...searchKeymap
        ]),
        look,
        EditorView.contentAttributes.of({ "aria-label": area.getAttribute("aria-label") || "" })
      ]
    })
  });
  area.hidden = true;
  area.parentNode.insertBefore(host, area);
  // The textarea is what the form posts.
  const form = area.form;
  if (form) {
    form.addEventListener("submit", () => { area.value = view.state.doc.toString(); });
  }
  // Tests and people at the console can reach the editor of the page.
  area.editorView = view;
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("textarea[data-editor]").forEach(enhance);
});
