//! A workflow's DAG drawn as SVG: each node a box in the column of its depth (its longest path
//! from a root), parents left of their children; edges as curves, dashed for `FAILURE` and
//! dotted for `ALWAYS`. Colours come from classes in `console.css` (the console's CSP allows
//! no inline style); a node with a run links to it.

use std::fmt::Write as _;

use tickwork_core::workflow::step::NodeState;
use tickwork_core::workflow::{Dag, EdgeOn, Graph};

const BOX_W: usize = 170;
const BOX_H: usize = 46;
const COL_GAP: usize = 70;
const ROW_GAP: usize = 22;
const PAD: usize = 12;

/// What a node shows besides its key and job.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeLook {
    pub state: Option<NodeState>,
    /// Its state in the page's language.
    pub state_label: String,
    /// Where a click goes: its current run.
    pub href: Option<String>,
}

/// Each node's column (depth) and row.
fn layout(graph: &Graph) -> Vec<(usize, usize)> {
    let mut depth = vec![0usize; graph.len()];
    for &i in graph.order() {
        for &(c, _) in graph.children(i) {
            depth[c] = depth[c].max(depth[i] + 1);
        }
    }
    let mut rows_used = Vec::new();
    let mut place = vec![(0, 0); graph.len()];
    // Rows in definition order within a column, so the drawing follows the author's order.
    for i in 0..graph.len() {
        let col = depth[i];
        if rows_used.len() <= col {
            rows_used.resize(col + 1, 0);
        }
        place[i] = (col, rows_used[col]);
        rows_used[col] += 1;
    }
    place
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `n` characters, an ellipsis when cut.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(n - 1).collect();
        s.push('…');
        s
    }
}

/// The SVG of `dag` (checked as `graph`), each node looking as `looks` says (by node index).
pub(super) fn draw(dag: &Dag, graph: &Graph, looks: &[NodeLook]) -> String {
    let place = layout(graph);
    let cols = place.iter().map(|p| p.0 + 1).max().unwrap_or(1);
    let rows = place.iter().map(|p| p.1 + 1).max().unwrap_or(1);
    let width = PAD * 2 + cols * BOX_W + (cols - 1) * COL_GAP;
    let height = PAD * 2 + rows * BOX_H + (rows - 1) * ROW_GAP;
    let at = |i: usize| {
        let (col, row) = place[i];
        (PAD + col * (BOX_W + COL_GAP), PAD + row * (BOX_H + ROW_GAP))
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="dag" id="dag" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">"#
    );
    svg.push_str(
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker></defs>"##,
    );
    for i in 0..graph.len() {
        for &(c, on) in graph.children(i) {
            let (x1, y1) = at(i);
            let (x2, y2) = at(c);
            let (x1, y1) = (x1 + BOX_W, y1 + BOX_H / 2);
            let y2 = y2 + BOX_H / 2;
            let mid = (x1 + x2) / 2;
            let class = match on {
                EdgeOn::Success => "edge",
                EdgeOn::Failure => "edge edge-failure",
                EdgeOn::Always => "edge edge-always",
            };
            let dash = match on {
                EdgeOn::Success => "",
                EdgeOn::Failure => r#" stroke-dasharray="6 4""#,
                EdgeOn::Always => r#" stroke-dasharray="2 3""#,
            };
            let _ = write!(
                svg,
                r##"<path class="{class}" data-from="{}" data-to="{}" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}" fill="none" stroke="#6b7280"{dash} marker-end="url(#arrow)"/>"##,
                escape(&dag.nodes[i].key),
                escape(&dag.nodes[c].key),
            );
        }
    }
    for (i, node) in dag.nodes.iter().enumerate() {
        let (x, y) = at(i);
        let look = looks.get(i).cloned().unwrap_or_default();
        let state = look.state.map(|s| s.as_str()).unwrap_or("DEFINED");
        let key = escape(&node.key);
        if let Some(href) = &look.href {
            let _ = write!(svg, r#"<a href="{}">"#, escape(href));
        }
        let _ = write!(
            svg,
            r##"<g class="node node-{state}" id="node-{key}" data-state="{state}"><title>{key}: {}</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#f3f4f6" stroke="#9ca3af"/><text x="{}" y="{}" class="node-key">{}</text><text x="{}" y="{}" class="node-sub">{}</text></g>"##,
            escape(&node.job),
            x + 10,
            y + 19,
            escape(&clip(&node.key, 22)),
            x + 10,
            y + 36,
            escape(&clip(
                &if look.state_label.is_empty() {
                    node.job.clone()
                } else {
                    format!("{} · {}", look.state_label, node.job)
                },
                26
            )),
        );
        if look.href.is_some() {
            svg.push_str("</a>");
        }
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork_core::job::Limits;
    use tickwork_core::workflow::{Edge, Node};

    fn diamond() -> Dag {
        Dag {
            nodes: ["A", "B", "C", "D"]
                .iter()
                .map(|k| Node::new(*k, format!("job-{k}")))
                .collect(),
            edges: vec![
                Edge::new("A", "B", EdgeOn::Success),
                Edge::new("A", "C", EdgeOn::Failure),
                Edge::new("B", "D", EdgeOn::Success),
                Edge::new("C", "D", EdgeOn::Always),
            ],
        }
    }

    #[test]
    fn a_diamond_is_laid_out_by_depth() {
        let d = diamond();
        let g = Graph::new(&d, &Limits::STANDARD).unwrap();
        // (column, row) of A, B, C, D: B and C side by side, D after both.
        assert_eq!(layout(&g), [(0, 0), (1, 0), (1, 1), (2, 0)]);
    }

    #[test]
    fn nodes_show_their_state_and_link_to_their_run() {
        let d = diamond();
        let g = Graph::new(&d, &Limits::STANDARD).unwrap();
        let looks = vec![
            NodeLook {
                state: Some(NodeState::Succeeded),
                state_label: "Succeeded".into(),
                href: Some("/runs/7".into()),
            },
            NodeLook::default(),
            NodeLook::default(),
            NodeLook::default(),
        ];
        let svg = draw(&d, &g, &looks);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"<a href="/runs/7"><g class="node node-SUCCEEDED" id="node-A""#));
        assert!(svg.contains(r#"class="node node-DEFINED" id="node-D""#));
        assert_eq!(svg.matches("<path class=\"edge").count(), 4);
        assert!(svg.contains("edge edge-failure"));
        assert!(svg.contains("edge edge-always"));
    }

    #[test]
    fn text_is_escaped() {
        let mut d = Dag {
            nodes: vec![Node::new("a", "<script>")],
            edges: Vec::new(),
        };
        d.nodes[0].job = "x\"><script>alert(1)</script>".into();
        let g = Graph::new(&d, &Limits::STANDARD).unwrap();
        let svg = draw(&d, &g, &[]);
        assert!(!svg.contains("<script>"), "{svg}");
    }
}
