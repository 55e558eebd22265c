//! Every rule of `tenure::Rule` is logged by the file that
//! [`Rule::decided_in`] names (its variant appears there, where every
//! decision line logs `"rule" => Rule::…`), and has a test named after it
//! (`<rule>_<behaviour>` in a file under `tests/`, subdirectories
//! included). A rule added without both, or moved without updating where
//! it says it is decided, fails here.

use std::fs;
use std::path::Path;

use tenure::Rule;

fn read_dir_rs(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| (p.display().to_string(), fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort();
    files
}

/// Every `.rs` file under `dir`, in its subdirectories too (a test binary
/// is a directory of modules).
fn read_tree_rs(dir: &Path) -> Vec<(String, String)> {
    let mut files = read_dir_rs(dir);
    let mut subdirs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        files.extend(read_tree_rs(&sub));
    }
    files
}

/// Whether `text` names `variant` as a whole path (`Rule::PreVote` is not
/// found in `Rule::PreVoteGrant`).
fn mentions_variant(text: &str, variant: &str) -> bool {
    text.match_indices(variant).any(|(at, _)| {
        !text[at + variant.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn every_rule_is_logged_by_the_file_that_decides_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing: Vec<String> = Rule::ALL
        .iter()
        .filter(|rule| {
            let text = fs::read_to_string(root.join(rule.decided_in())).unwrap_or_default();
            !mentions_variant(&text, &format!("Rule::{rule:?}"))
        })
        .map(|rule| format!("{} (in {})", rule.name(), rule.decided_in()))
        .collect();
    assert!(
        missing.is_empty(),
        "rules not logged by the file that says it decides them: {missing:?}"
    );
}

#[test]
fn every_rule_has_a_test_named_after_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests: Vec<String> = read_tree_rs(&root.join("tests"))
        .into_iter()
        .flat_map(|(_, text)| {
            text.lines()
                .filter_map(|l| l.trim_start().strip_prefix("fn "))
                .map(|l| l.split('(').next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let missing: Vec<&str> = Rule::ALL
        .iter()
        .map(|rule| rule.name())
        .filter(|name| {
            !tests.iter().any(|t| {
                t.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('_'))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "rules with no test named `<rule>_<behaviour>`: {missing:?}"
    );
}

/// Every key the core logs is listed in the crate docs' "Log keys" table
/// (src/lib.rs), so an operator can look up what a key means.
#[test]
fn every_log_key_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let table: Vec<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .flat_map(|row| row.split(" |").next())
        .flat_map(|keys| keys.split(", "))
        .map(|k| k.trim_matches('`'))
        .collect();
    let mut missing = Vec::new();
    for (path, text) in read_dir_rs(&root.join("src/node")) {
        for (at, _) in text.match_indices("\" =>") {
            let start = text[..at].rfind('"').map_or(at, |s| s + 1);
            let key = &text[start..at];
            let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            // `"node" =>` is the logger's own key (set once in Node::new).
            if is_key && key != "node" && !table.contains(&key) {
                missing.push(format!("{key} ({path})"));
            }
        }
    }
    assert!(!table.is_empty(), "no log key table found in src/lib.rs");
    assert!(
        missing.is_empty(),
        "log keys not documented in src/lib.rs: {missing:?}"
    );
}

/// The function that logs a rule names it in its doc comment (so reading a
/// function's docs tells which rules it decides). The enclosing function
/// of each `Rule::X` in `src/node` is the nearest `fn` above it; its doc
/// comment is the `///` block right above that `fn` (attributes allowed).
#[test]
fn every_rule_is_named_in_the_docs_of_the_function_that_logs_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for (path, text) in read_dir_rs(&root.join("src/node")) {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            for rule in Rule::ALL {
                if !mentions_variant(line, &format!("Rule::{rule:?}")) {
                    continue;
                }
                let Some(f) = (0..=n).rev().find(|&i| is_fn_line(lines[i])) else {
                    continue;
                };
                let doc: String = lines[..f]
                    .iter()
                    .rev()
                    .map(|l| l.trim())
                    .skip_while(|l| l.starts_with("#["))
                    .take_while(|l| l.starts_with("///"))
                    .collect::<Vec<_>>()
                    .join(" ");
                if !doc.contains(&format!("`{}`", rule.name())) {
                    let name = lines[f].trim();
                    missing.push(format!("{} in `{name}` ({path}:{})", rule.name(), f + 1));
                }
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "functions that log a rule their doc comment does not name:\n{}",
        missing.join("\n")
    );
}

fn is_fn_line(line: &str) -> bool {
    let t = line.trim_start();
    ["fn ", "pub fn ", "pub(super) fn ", "pub(crate) fn "]
        .iter()
        .any(|p| t.starts_with(p))
}
