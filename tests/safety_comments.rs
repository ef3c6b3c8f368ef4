//! Every `unsafe {` block in src/ has its `// SAFETY:` comment beside it: the
//! comment's first line at most `NEAR` lines above the line that opens the
//! block (a long reason goes above the SAFETY line, as a plain comment), so a
//! reader finds the reason at the block. clippy's `undocumented_unsafe_blocks`
//! only asks that a comment exists somewhere in the comment run above.

use std::path::Path;

mod common;
use common::source::rust_files;

/// How far above the `unsafe {` line its SAFETY line may start.
const NEAR: usize = 3;

fn opens_unsafe_block(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("unsafe").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        word_start && code[i + "unsafe".len()..].trim_start().starts_with('{')
    })
}

/// The 1-based lines of `text` whose `unsafe {` has no SAFETY line within
/// `NEAR` lines above (or on the same line).
fn far_from_safety(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut far = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if !opens_unsafe_block(l) {
            continue;
        }
        let near = lines[i.saturating_sub(NEAR)..=i]
            .iter()
            .any(|x| x.contains("SAFETY:"));
        if !near {
            far.push(i + 1);
        }
    }
    far
}

#[test]
fn safety_comment_beside_every_unsafe_block() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 50, "src/ not found ({} files)", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for n in far_from_safety(&text) {
            bad.push(format!("{}:{n}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "`unsafe {{` more than {NEAR} lines below its `// SAFETY:` line (move the SAFETY line \
         down to the block, a longer reason above it): {bad:#?}"
    );
}

#[test]
fn the_scan_sees_a_far_comment() {
    let near = "// SAFETY: fine.\nlet x = unsafe { f() };\n";
    assert!(far_from_safety(near).is_empty());
    let far = "// SAFETY: one\n// two\n// three\n// four\nlet x =\n    unsafe { f() };\n";
    assert_eq!(far_from_safety(far), vec![6]);
    let none = "fn g() {\n    unsafe { f() }\n}\n";
    assert_eq!(far_from_safety(none), vec![2]);
    assert!(far_from_safety("pub unsafe fn f() {}\n// unsafe { in a comment\n").is_empty());
}
