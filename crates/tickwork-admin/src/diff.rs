//! A line diff of two texts (Myers' O(ND) shortest edit script): which lines both versions
//! keep, which the old one had and the new one lost, which the new one added. The console
//! compares two versions of a job's script with it.
//!
//! Lines are the pieces between line breaks, as an editor numbers them: a text that ends with a
//! line break ends with an empty line, so a last line break added or removed shows as that
//! empty line added or removed. The work is bounded: past [`MAX_EDITS`] edits or [`MAX_STEPS`] steps (two
//! long, mostly different texts) the middle is given as all removed, then all added: still a
//! true diff, only not the shortest.

/// The most edits (removed plus added lines, after the common start and end) searched for.
pub const MAX_EDITS: usize = 1_000;
/// The most comparison steps spent on one diff.
pub const MAX_STEPS: usize = 20_000_000;

/// What happened to a line between the two texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// In both.
    Same,
    /// Only in the old text.
    Removed,
    /// Only in the new text.
    Added,
}

/// One line of a diff, with its number (from 1) in the old text and in the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub change: Change,
    pub old_no: Option<usize>,
    pub new_no: Option<usize>,
    /// The line, without its line break.
    pub text: String,
}

impl Change {
    /// `same`, `removed` or `added`: the name the REST API answers and the console's CSS
    /// class.
    pub fn name(self) -> &'static str {
        match self {
            Change::Same => "same",
            Change::Removed => "removed",
            Change::Added => "added",
        }
    }
}

/// How many lines of `lines` were added and how many removed.
pub fn added_and_removed(lines: &[DiffLine]) -> (usize, usize) {
    let count = |change| lines.iter().filter(|l| l.change == change).count();
    (count(Change::Added), count(Change::Removed))
}

impl DiffLine {
    /// `" "`, `"-"` or `"+"`, as unified diffs mark lines.
    pub fn mark(&self) -> &'static str {
        match self.change {
            Change::Same => " ",
            Change::Removed => "-",
            Change::Added => "+",
        }
    }
}

/// The lines of `old` and `new`, in order, each marked kept, removed or added.
pub fn diff_lines(old: &str, new: &str) -> Vec<DiffLine> {
    let a = lines(old);
    let b = lines(new);
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (mid_a, mid_b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let middle = shortest_edits(mid_a, mid_b).unwrap_or_else(|| {
        let mut all = vec![Change::Removed; mid_a.len()];
        all.resize(mid_a.len() + mid_b.len(), Change::Added);
        all
    });

    let changes = std::iter::repeat_n(Change::Same, head)
        .chain(middle)
        .chain(std::iter::repeat_n(Change::Same, tail));
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    for change in changes {
        let (old_no, new_no, text) = match change {
            Change::Same => {
                i += 1;
                j += 1;
                (Some(i), Some(j), a[i - 1])
            }
            Change::Removed => {
                i += 1;
                (Some(i), None, a[i - 1])
            }
            Change::Added => {
                j += 1;
                (None, Some(j), b[j - 1])
            }
        };
        out.push(DiffLine {
            change,
            old_no,
            new_no,
            text: text.to_owned(),
        });
    }
    out
}

/// The lines of `text` as an editor shows them; none for an empty text.
fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split('\n').collect()
    }
}

/// The shortest edit script turning `a` into `b`, or `None` when it needs more than
/// [`MAX_EDITS`] edits or [`MAX_STEPS`] steps to find.
///
/// `v[k]` is the furthest `x` reached on diagonal `k = x - y` with the edits spent so far;
/// the rounds' `v`s are kept (only the diagonals a round can reach) to walk back from the end.
fn shortest_edits(a: &[&str], b: &[&str]) -> Option<Vec<Change>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let limit = (a.len() + b.len()).min(MAX_EDITS) as isize;
    // Diagonal k lives at v[k + off]; rounds look one diagonal past their own edit count.
    let off = limit + 1;
    let mut v = vec![0isize; (2 * limit + 3) as usize];
    let mut rounds: Vec<Vec<isize>> = Vec::new();
    let mut steps = 0usize;
    for d in 0..=limit {
        // Before round d: the diagonals -d-1..=d+1 of the rounds so far.
        rounds.push(v[(off - d - 1) as usize..=(off + d + 1) as usize].to_vec());
        for k in (-d..=d).step_by(2) {
            let at = |k: isize| v[(k + off) as usize];
            let down = k == -d || (k != d && at(k - 1) < at(k + 1));
            let mut x = if down { at(k + 1) } else { at(k - 1) + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            steps += 1 + (x - at(if down { k + 1 } else { k - 1 })).unsigned_abs();
            v[(k + off) as usize] = x;
            if x >= n && y >= m {
                return Some(walk_back(&rounds, n, m));
            }
        }
        if steps > MAX_STEPS {
            return None;
        }
    }
    None
}

/// The edits, from the end back to the start through the kept rounds, then in order.
fn walk_back(rounds: &[Vec<isize>], n: isize, m: isize) -> Vec<Change> {
    let (mut x, mut y) = (n, m);
    let mut out = Vec::with_capacity((n + m) as usize);
    for (d, v) in rounds.iter().enumerate().rev() {
        let d = d as isize;
        // This round's copy starts at diagonal -d-1.
        let at = |k: isize| v[(k + d + 1) as usize];
        let k = x - y;
        let down = k == -d || (k != d && at(k - 1) < at(k + 1));
        let prev_k = if down { k + 1 } else { k - 1 };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            out.push(Change::Same);
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            out.push(if down { Change::Added } else { Change::Removed });
        }
        (x, y) = (prev_x, prev_y);
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diff written as one line per line: the mark, then the text.
    fn render(lines: &[DiffLine]) -> Vec<String> {
        lines
            .iter()
            .map(|l| format!("{}{}", l.mark(), l.text))
            .collect()
    }

    #[test]
    fn line_diffs() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("", "", &[]),
            ("a", "a", &[" a"]),
            ("a\n", "a\n", &[" a", " "]),
            ("", "a\nb", &["+a", "+b"]),
            ("a\nb", "", &["-a", "-b"]),
            ("a\nb\nc", "a\nc", &[" a", "-b", " c"]),
            ("a\nc", "a\nb\nc", &[" a", "+b", " c"]),
            ("a\nb\nc", "a\nB\nc", &[" a", "-b", "+B", " c"]),
            // A line added at the end of a text without a last line break.
            (
                "echo one",
                "echo one\necho two",
                &[" echo one", "+echo two"],
            ),
            // The classic example: ABCABBA to CBABAC, five edits.
            (
                "A\nB\nC\nA\nB\nB\nA",
                "C\nB\nA\nB\nA\nC",
                &["-A", "-B", " C", "+B", " A", " B", "-B", " A", "+C"],
            ),
            // Repeated lines: the shortest script keeps as many as it can.
            ("x\nx\nx", "x\ny\nx", &[" x", "-x", "+y", " x"]),
            // A last line break removed: the empty last line goes.
            ("echo hi\n", "echo hi", &[" echo hi", "-"]),
            (
                "def f():\n    return 1\n",
                "def f():\n    x = 1\n    return x\n",
                &[
                    " def f():",
                    "-    return 1",
                    "+    x = 1",
                    "+    return x",
                    " ",
                ],
            ),
            // Everything different.
            ("a\nb", "c\nd", &["-a", "-b", "+c", "+d"]),
            // Empty lines count as lines.
            ("a\n\nb", "a\nb", &[" a", "-", " b"]),
        ];
        for (old, new, want) in cases {
            let got = diff_lines(old, new);
            assert_eq!(render(&got), *want, "diff of {old:?} and {new:?}");
        }
    }

    #[test]
    fn line_numbers_follow_each_side() {
        let got = diff_lines("a\nb\nc", "a\nx\nc\nd");
        let numbers: Vec<_> = got.iter().map(|l| (l.old_no, l.new_no)).collect();
        assert_eq!(
            numbers,
            [
                (Some(1), Some(1)),
                (Some(2), None),
                (None, Some(2)),
                (Some(3), Some(3)),
                (None, Some(4)),
            ]
        );
    }

    /// Applying a diff's kept and added lines gives the new text, its kept and removed lines
    /// the old one, and its edits are as few as a plain LCS table says, for every pair of
    /// short texts over a small alphabet.
    #[test]
    fn diffs_are_shortest_and_rebuild_both_texts() {
        let texts: Vec<String> = (0..3u32.pow(5))
            .flat_map(|code| {
                (0..=5).map(move |len| {
                    (0..len)
                        .map(|i| ["a", "b", "c"][(code / 3u32.pow(i)) as usize % 3])
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for old in texts.iter().step_by(7) {
            for new in texts.iter().step_by(5) {
                let d = diff_lines(old, new);
                let side = |keep: Change| -> String {
                    d.iter()
                        .filter(|l| l.change == Change::Same || l.change == keep)
                        .map(|l| l.text.as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                assert_eq!(side(Change::Removed), *old);
                assert_eq!(side(Change::Added), *new);
                let edits = d.iter().filter(|l| l.change != Change::Same).count();
                assert_eq!(edits, lcs_edits(old, new), "{old:?} -> {new:?}");
            }
        }
    }

    /// The fewest edits by the textbook LCS table.
    fn lcs_edits(old: &str, new: &str) -> usize {
        let (a, b) = (lines(old), lines(new));
        let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                t[i][j] = if a[i] == b[j] {
                    t[i + 1][j + 1] + 1
                } else {
                    t[i + 1][j].max(t[i][j + 1])
                };
            }
        }
        a.len() + b.len() - 2 * t[0][0]
    }

    #[test]
    fn too_many_edits_fall_back_to_a_true_replacement() {
        let old: String = (0..3_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..3_000).map(|i| format!("new {i}\n")).collect();
        let d = diff_lines(&format!("same\n{old}end"), &format!("same\n{new}end"));
        assert_eq!(d.len(), 6_002);
        assert_eq!(d[0].change, Change::Same);
        assert!(d[1..3_001].iter().all(|l| l.change == Change::Removed));
        assert!(d[3_001..6_001].iter().all(|l| l.change == Change::Added));
        assert_eq!(
            (d[6_001].old_no, d[6_001].new_no),
            (Some(3_002), Some(3_002))
        );
    }
}
