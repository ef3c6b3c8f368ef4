//! The module graph stays layered: no import circle anywhere in the crate
//! (every folder of `src/`), `src/tool/`'s folders layered, and `tool/`
//! never imports `fabric/` (the fabric mode runs pairs
//! through `tool`, never the reverse). README "Architecture" has the map.
//!
//! The graph is read from the sources: every `crate::…`, `super::…` path
//! (in `use` trees with their `{a, b::{c}}` groups, and inline), and in a
//! `mod.rs` the paths through its own child modules, resolved to the file
//! that holds the module they name. `#[cfg(test)] mod …` blocks and
//! comments are left out: a unit test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below the crate root (`["tool", "setup"]`).
type ModPath = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module a file under `src/` holds (`tool/mod.rs` → `tool`).
fn module_of(rel: &Path) -> ModPath {
    let mut v: ModPath = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if v.last().is_some_and(|l| l == "mod" || l == "lib") {
        v.pop();
    }
    v
}

/// The source without comments, string contents and `#[cfg(test)] mod` blocks.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i + 1 < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            // Error texts name paths too ("see tool::direct"): not imports.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"', '\n'); lifetimes ('a) are kept.
            let end = src[i + 1..].find('\'').map_or(b.len(), |k| i + 2 + k);
            i = end;
            out.push_str("' '");
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Drop each `#[cfg(test)] mod name { … }` (braces balanced).
    let mut s = out;
    while let Some(at) = s.find("#[cfg(test)]") {
        let rest = s[at + "#[cfg(test)]".len()..].trim_start();
        if !rest.starts_with("mod ") {
            // A test-only item that is not a module: keep scanning after it.
            s.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let open = match s[at..].find('{') {
            Some(k) => at + k,
            None => break,
        };
        let mut depth = 0usize;
        let mut end = s.len();
        for (k, ch) in s[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        s.replace_range(at..end, "");
    }
    s
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parses a path tree at `s` (after a `crate::`/`super::` prefix): `a::b`,
/// `a::{b, c::{d}}`, `a::*`; returns every full path (segments).
fn tree(s: &str) -> Vec<Vec<String>> {
    fn go(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let skip_ws = |i: &mut usize| {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
        };
        skip_ws(i);
        if *i < s.len() && s[*i] == '{' {
            *i += 1;
            loop {
                skip_ws(i);
                if *i >= s.len() || s[*i] == '}' {
                    *i += 1;
                    return;
                }
                go(s, i, prefix, out);
                skip_ws(i);
                if *i < s.len() && s[*i] == ',' {
                    *i += 1;
                }
            }
        }
        let start = *i;
        while *i < s.len() && is_ident(s[*i]) {
            *i += 1;
        }
        let seg: String = s[start..*i].iter().collect();
        let mut path = prefix.to_vec();
        if !seg.is_empty() && seg != "self" {
            path.push(seg);
        }
        if *i + 1 < s.len() && s[*i] == ':' && s[*i + 1] == ':' {
            *i += 2;
            go(s, i, &path, out);
        } else {
            out.push(path);
        }
    }
    let chars: Vec<char> = s.chars().take(2000).collect();
    let mut out = Vec::new();
    let mut i = 0;
    go(&chars, &mut i, &[], &mut out);
    out
}

/// Every module path `code` (of module `me`, whose child modules are
/// `children` when it is a `mod.rs`) refers to.
fn refs(code: &str, me: &ModPath, children: &BTreeSet<String>) -> Vec<ModPath> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !code.is_char_boundary(i) || (i > 0 && (ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let (base, skip): (ModPath, usize) = if rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if rest.starts_with("super::") {
            let mut base = me.clone();
            let mut k = 0;
            while rest[k..].starts_with("super::") {
                base.pop();
                k += "super::".len();
            }
            (base, k)
        } else {
            // A path through one of this mod.rs's own children (`side::run`).
            let n = rest.bytes().take_while(|c| ident(*c)).count();
            if n > 0 && children.contains(&rest[..n]) && rest[n..].starts_with("::") {
                (me.clone(), 0)
            } else {
                i += n.max(1);
                continue;
            }
        };
        for p in tree(&rest[skip..]) {
            let mut full = base.clone();
            full.extend(p);
            out.push(full);
        }
        i += skip.max(1);
    }
    out
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        e: &'a BTreeMap<String, BTreeSet<String>>,
        idx: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        n: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        t.idx.insert(v.into(), t.n);
        t.low.insert(v.into(), t.n);
        t.n += 1;
        t.stack.push(v.into());
        t.on.insert(v.into());
        let next: Vec<String> = t.e.get(v).into_iter().flatten().cloned().collect();
        for w in next {
            if !t.idx.contains_key(&w) {
                visit(t, &w);
                let l = t.low[v].min(t.low[&w]);
                t.low.insert(v.into(), l);
            } else if t.on.contains(&w) {
                let l = t.low[v].min(t.idx[&w]);
                t.low.insert(v.into(), l);
            }
        }
        if t.low[v] == t.idx[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        e: edges,
        idx: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        n: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.idx.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The crate's file graph: file (relative to src/) → files it imports from.
fn crate_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut by_mod: BTreeMap<ModPath, String> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel == Path::new("main.rs") {
            continue; // the binary: it uses the library by its name
        }
        by_mod.insert(module_of(rel), rel.to_string_lossy().into_owned());
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (me, file) in &by_mod {
        let is_dir_mod = file.ends_with("mod.rs") || file == "lib.rs";
        let children: BTreeSet<String> = if is_dir_mod {
            by_mod
                .keys()
                .filter(|m| m.len() == me.len() + 1 && m.starts_with(me))
                .map(|m| m.last().unwrap().clone())
                .collect()
        } else {
            BTreeSet::new()
        };
        let code = code_of(&std::fs::read_to_string(src.join(file)).unwrap());
        let deps = edges.entry(file.clone()).or_default();
        for r in refs(&code, me, &children) {
            // The longest prefix that is a file's module.
            let hit = (0..=r.len())
                .rev()
                .find_map(|k| by_mod.get(&r[..k]))
                .filter(|f| *f != file && !r.is_empty());
            if let Some(f) = hit {
                deps.insert(f.clone());
            }
        }
    }
    edges
}

#[test]
fn tool_modules_form_no_circle() {
    let g = crate_graph();
    let tool: BTreeMap<String, BTreeSet<String>> = g
        .iter()
        .filter(|(f, _)| f.starts_with("tool/"))
        .map(|(f, d)| {
            let d = d
                .iter()
                .filter(|x| x.starts_with("tool/"))
                .cloned()
                .collect();
            (f.clone(), d)
        })
        .collect();
    assert!(
        tool.len() > 10,
        "found only {} files in src/tool",
        tool.len()
    );
    // Sanity: the reader sees the imports it must (a grouped use, an inline path).
    assert!(
        tool["tool/runs/bw_session.rs"].contains("tool/common/progress.rs"),
        "{:?}",
        tool["tool/runs/bw_session.rs"]
    );
    assert!(
        tool["tool/runs/lat.rs"].contains("tool/common/peer_exit.rs"),
        "{:?}",
        tool["tool/runs/lat.rs"]
    );
    assert!(
        tool["tool/mod.rs"].contains("tool/side.rs"),
        "{:?}",
        tool["tool/mod.rs"]
    );
    let c = circles(&tool);
    assert!(
        c.is_empty(),
        "import circles in src/tool (each set imports itself through the others): {c:?}; \
         move what they share into a module below both (README, Architecture)"
    );
}

/// The layer of a `tool/` file: its folder's place in [`TOOL_LAYERS`], or
/// the top (`side.rs`, `compare.rs`, `mod.rs` directly in `tool/`).
fn tool_layer(file: &str) -> usize {
    let rest = file.trim_start_matches("tool/");
    match rest.split_once('/') {
        Some((folder, _)) => TOOL_LAYERS
            .iter()
            .position(|l| *l == folder)
            .unwrap_or_else(|| panic!("{file}: folder `{folder}` is not in TOOL_LAYERS")),
        None => TOOL_LAYERS.len(),
    }
}

/// `tool/`'s folders, bottom first (README, Architecture).
const TOOL_LAYERS: [&str; 4] = ["common", "setup", "session", "runs"];

/// Imports from a `tool/` file into a higher layer than its own.
fn layer_violations(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (f, deps) in g.iter().filter(|(f, _)| f.starts_with("tool/")) {
        for d in deps.iter().filter(|d| d.starts_with("tool/")) {
            if tool_layer(d) > tool_layer(f) {
                bad.push(format!("{f} imports {d}"));
            }
        }
    }
    bad
}

/// The subgraph of files under `dir` (edges inside it only).
fn subgraph(
    g: &BTreeMap<String, BTreeSet<String>>,
    dir: &str,
) -> BTreeMap<String, BTreeSet<String>> {
    g.iter()
        .filter(|(f, _)| f.starts_with(dir))
        .map(|(f, d)| {
            (
                f.clone(),
                d.iter().filter(|x| x.starts_with(dir)).cloned().collect(),
            )
        })
        .collect()
}

#[test]
fn tool_folders_are_layered() {
    let g = crate_graph();
    let bad = layer_violations(&g);
    assert!(
        bad.is_empty(),
        "tool/ imports from a higher layer ({TOOL_LAYERS:?}, then side/compare/mod): {bad:?}; \
         move the shared piece down"
    );
    // Every tool file sits in a known folder or at the top.
    let top: Vec<_> = g
        .keys()
        .filter(|f| f.starts_with("tool/") && tool_layer(f) == TOOL_LAYERS.len())
        .collect();
    assert_eq!(top, ["tool/compare.rs", "tool/mod.rs", "tool/side.rs"]);
}

#[test]
fn the_layer_check_can_fail() {
    let mut g = BTreeMap::new();
    g.insert(
        "tool/common/fail.rs".to_string(),
        BTreeSet::from(["tool/runs/lat.rs".to_string()]),
    );
    g.insert("tool/runs/lat.rs".to_string(), BTreeSet::new());
    assert_eq!(
        layer_violations(&g),
        ["tool/common/fail.rs imports tool/runs/lat.rs"]
    );
}

/// No import circle anywhere in the crate: every folder of `src/` (and the
/// files at its top) is one graph, and no set of files imports itself
/// through the others. Each folder is named in the message, so a circle
/// reads as "in src/verbs/" rather than as a list of paths alone.
#[test]
fn no_file_circle_anywhere_in_the_crate() {
    let g = crate_graph();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // Every folder of src/ is in the graph (the reader did not skip one).
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let dir = format!("{}/", p.file_name().unwrap().to_string_lossy());
            assert!(
                !subgraph(&g, &dir).is_empty(),
                "src/{dir} has no file in the module graph"
            );
        }
    }
    let c = circles(&g);
    let named: Vec<String> = c
        .iter()
        .map(|files| {
            let dirs: BTreeSet<&str> = files
                .iter()
                .map(|f| f.split_once('/').map_or("src", |(d, _)| d))
                .collect();
            format!("in {dirs:?}: {files:?}")
        })
        .collect();
    assert!(
        c.is_empty(),
        "import circles (each set imports itself through the others): {named:?}; \
         move what they share into a module below both"
    );
    // Sanity: the reader sees the CQ's imports, the NIC's, and a re-export.
    assert!(
        g["mlx5/cq.rs"].contains("mlx5/recv.rs"),
        "{:?}",
        g["mlx5/cq.rs"]
    );
    assert!(
        g["model/nic.rs"].contains("model/recv.rs") && g["model/mod.rs"].contains("model/nic.rs"),
        "{:?}",
        g["model/nic.rs"]
    );
    assert!(
        g["verbs/mr.rs"].contains("verbs/devmem.rs"),
        "{:?}",
        g["verbs/mr.rs"]
    );
    assert!(
        g["verbs/mod.rs"].contains("verbs/context.rs"),
        "{:?}",
        g["verbs/mod.rs"]
    );
}

/// A re-export is an import too: `device.rs` re-exporting `context.rs`'s
/// types while `context.rs` reads the device list closes a circle.
#[test]
fn a_re_export_closes_a_circle() {
    let me: ModPath = vec!["verbs".into(), "device".into()];
    let r: Vec<String> = refs(
        &code_of("pub use super::context::{Context, DeviceAttr};\n"),
        &me,
        &BTreeSet::new(),
    )
    .into_iter()
    .map(|p| p.join("::"))
    .collect();
    assert!(r.contains(&"verbs::context::Context".to_string()), "{r:?}");
}

/// `raw/` (the raw Ethernet tools) forms no import circle, and its frame
/// builder, pcap writer and line-rate arithmetic stay pure: they import
/// nothing from the crate, so the model, the tests and a later post path
/// can all sit on them.
#[test]
fn raw_files_form_no_circle_and_its_frame_layer_is_pure() {
    let g = crate_graph();
    let sub = subgraph(&g, "raw/");
    assert!(sub.len() > 5, "found only {} files in src/raw/", sub.len());
    let c = circles(&sub);
    assert!(c.is_empty(), "import circles in src/raw/: {c:?}");
    for f in ["raw/frame.rs", "raw/pcap.rs", "raw/line_rate.rs"] {
        let d = g
            .get(f)
            .unwrap_or_else(|| panic!("{f} is gone: update this guard"));
        assert!(
            d.is_empty(),
            "{f} imports {d:?}: keep the frame layer free of the crate"
        );
    }
    // Sanity: the reader sees raw's own imports.
    assert!(
        g["raw/params.rs"].contains("raw/frame.rs"),
        "{:?}",
        g["raw/params.rs"]
    );
    assert!(
        g["raw/cli.rs"].contains("raw/preflight.rs"),
        "{:?}",
        g["raw/cli.rs"]
    );
}

#[test]
fn no_circle_in_the_crate_passes_through_tool() {
    let g = crate_graph();
    let c: Vec<_> = circles(&g)
        .into_iter()
        .filter(|c| c.iter().any(|f| f.starts_with("tool/")))
        .collect();
    assert!(
        c.is_empty(),
        "import circles through src/tool: {c:?}; the file outside tool/ must not import tool/ \
         (or move the shared piece below both)"
    );
}

#[test]
fn tool_never_imports_fabric() {
    let g = crate_graph();
    for (f, d) in g.iter().filter(|(f, _)| f.starts_with("tool/")) {
        let bad: Vec<_> = d.iter().filter(|x| x.starts_with("fabric/")).collect();
        assert!(
            bad.is_empty(),
            "{f} imports {bad:?}: the fabric mode runs pairs through tool, never the reverse; \
             give tool a seam (ctrl::link) instead"
        );
    }
    // The fabric mode does use tool (the check above would be vacuous otherwise).
    assert!(
        g.iter()
            .any(|(f, d)| f.starts_with("fabric/") && d.iter().any(|x| x.starts_with("tool/"))),
        "no fabric/ file imports tool/: the reader lost the fabric → tool edge"
    );
}

#[test]
fn the_reader_finds_a_circle() {
    // The check can fail: two files that import each other are one circle.
    let mut g = BTreeMap::new();
    let code_a = code_of(
        "use super::b::{self, X};\n// super::c\n#[cfg(test)]\nmod tests { use super::c; }\n",
    );
    let code_b = code_of("fn f() { super::a::g(\"super::c\") }\n");
    let me_a: ModPath = vec!["tool".into(), "a".into()];
    let me_b: ModPath = vec!["tool".into(), "b".into()];
    let none = BTreeSet::new();
    let ra: BTreeSet<String> = refs(&code_a, &me_a, &none)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    let rb: BTreeSet<String> = refs(&code_b, &me_b, &none)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        ra,
        BTreeSet::from(["tool::b".to_string(), "tool::b::X".to_string()])
    );
    assert_eq!(rb, BTreeSet::from(["tool::a::g".to_string()]));
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

/// `explain/` has no two files that import each other: what two of them
/// share (doctor's `Check`, the GPU run's findings) lives in one of them or
/// below both (`rules`, `gpu_findings`).
#[test]
fn explain_has_no_two_file_circle() {
    let g = subgraph(&crate_graph(), "explain/");
    assert!(g.len() > 8, "found only {} files in src/explain", g.len());
    let pairs: Vec<(String, String)> = g
        .iter()
        .flat_map(|(a, deps)| {
            deps.iter()
                .filter(|b| a < *b && g.get(*b).is_some_and(|d| d.contains(a)))
                .map(|b| (a.clone(), b.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        pairs.is_empty(),
        "files in src/explain that import each other: {pairs:?}; move the shared piece into \
         the one that uses it or below both"
    );
    // Sanity: the reader sees explain's edges.
    assert!(
        g["explain/gpu_findings.rs"].contains("explain/gpu_topo.rs"),
        "{:?}",
        g["explain/gpu_findings.rs"]
    );
}
