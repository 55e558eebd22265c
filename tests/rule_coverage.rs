//! Every rule of `tenure::Rule` is applied somewhere that logs it (its
//! variant appears in the core's source, where every decision line logs
//! `"rule" => Rule::…`) and has a test named after it (`<rule>_<behaviour>`
//! in `tests/`). A rule added without both fails here.

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

#[test]
fn every_rule_is_logged_by_the_core() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let core: String = read_dir_rs(&root.join("src/node"))
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    let missing: Vec<&str> = Rule::ALL
        .iter()
        .filter(|rule| !core.contains(&format!("Rule::{rule:?}")))
        .map(|rule| rule.name())
        .collect();
    assert!(
        missing.is_empty(),
        "rules no decision in src/node logs: {missing:?}"
    );
}

#[test]
fn every_rule_has_a_test_named_after_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests: Vec<String> = read_dir_rs(&root.join("tests"))
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
