//! The shipped operator examples and the book, checked against the binary:
//! every node file under `examples/` and every `toml` block of the README
//! and `docs/src` parses with the node-file loader; the 3-node cluster of
//! `examples/cluster/` elects a leader; the systemd units in
//! `examples/systemd/` name existing subcommands and flags; and the
//! operations walk-through (`docs/src/walkthrough.md`) runs as written.

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Proc, keygen, lines_of, status, until};
use tenure::adapters::config::{NodeFile, OperatorSettings, RankSettings};

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every file below `dir` whose name ends with `suffix`, sorted.
fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // State a local run of the example cluster left behind.
                if path.file_name().is_some_and(|n| n != "data") {
                    dirs.push(path);
                }
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A fenced code block: its info string (`toml`, `toml,partial`, `sh`),
/// its text and the line its fence opens on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// The fenced (```) code blocks of a Markdown text.
fn code_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match (&mut open, trimmed.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    text: String::new(),
                    line: n + 1,
                });
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => blocks.push(open.take().unwrap()),
            (Some(block), _) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    blocks
}

/// Checks a complete node file's text the way `tenure node` reads it: the
/// engine's keys and configuration, the rank keys, the operator keys.
fn check_complete(text: &str) -> Result<(), String> {
    let file = NodeFile::parse(text)?;
    let config = file
        .to_config()
        .map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    RankSettings::parse(text)
        .and_then(|rank| rank.apply(config))
        .map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    OperatorSettings::parse(text).map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    Ok(())
}

/// Checks a host file's text (a ```toml,host block) the way `tenure host`
/// reads it: its keys, its groups and every group's configuration.
fn check_host(text: &str) -> Result<(), String> {
    let file: tenure::adapters::config::HostFile =
        toml::from_str(text).map_err(|e| e.to_string())?;
    file.group_ids()
        .and_then(|_| file.to_config())
        .map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    OperatorSettings::parse(text).map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    Ok(())
}

/// Checks a deliberately partial block (```toml,partial): valid TOML whose
/// keys are node-file keys of the right types, once the required keys it
/// leaves out are added.
fn check_partial(text: &str) -> Result<(), String> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let required: [(&str, toml::Value); 4] = [
        ("id", 1.into()),
        ("cluster_id", 1.into()),
        ("listen", "127.0.0.1:1".into()),
        ("data_dir", "data".into()),
    ];
    for (key, value) in required {
        table.entry(key).or_insert(value);
    }
    let full = toml::to_string(&table).map_err(|e| e.to_string())?;
    NodeFile::parse(&full)?;
    RankSettings::parse(&full).map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    OperatorSettings::parse(&full).map_err(|(k, m)| format!("key `{k}`: {m}"))?;
    Ok(())
}

#[test]
fn every_example_node_file_loads() {
    let files = files_under(&root().join("examples"), ".toml");
    assert!(files.len() >= 3, "no node files under examples/: {files:?}");
    for path in &files {
        let file = NodeFile::load(path).unwrap_or_else(|e| panic!("{e}"));
        RankSettings::load(path).unwrap_or_else(|e| panic!("{e}"));
        let operator = OperatorSettings::load(path).unwrap_or_else(|e| panic!("{e}"));
        // A relative data_dir and key_file are the file's directory's.
        let dir = std::path::absolute(path.parent().unwrap()).unwrap();
        assert!(file.data_dir.starts_with(&dir), "{}", path.display());
        if let Some(key) = &operator.key_file {
            let key = std::path::absolute(key).unwrap();
            assert!(
                key.starts_with(path.parent().unwrap()),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn the_example_cluster_files_describe_one_cluster() {
    let files = files_under(&root().join("examples/cluster"), ".toml");
    let nodes: Vec<NodeFile> = files
        .iter()
        .map(|p| NodeFile::load(p).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(nodes.len(), 3, "{files:?}");
    for node in &nodes {
        assert_eq!(node.cluster_id, nodes[0].cluster_id);
        assert_eq!(node.fencing, tenure::Fencing::Strict, "node {}", node.id);
        // Its peers are exactly the other nodes, at their listen addresses.
        let mut peers: Vec<_> = node.peers.iter().map(|p| (p.id, p.addr.clone())).collect();
        let mut others: Vec<_> = nodes
            .iter()
            .filter(|n| n.id != node.id)
            .map(|n| (n.id, n.listen.clone()))
            .collect();
        peers.sort();
        others.sort();
        assert_eq!(peers, others, "node {}", node.id);
    }
    let mut dirs: Vec<_> = nodes.iter().map(|n| n.data_dir.clone()).collect();
    dirs.sort();
    dirs.dedup();
    assert_eq!(dirs.len(), 3, "one data directory per node");
}

#[test]
fn every_toml_block_in_the_readme_and_the_book_is_a_node_or_host_file() {
    let mut pages = vec![root().join("README.md")];
    pages.extend(files_under(&root().join("docs/src"), ".md"));
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for block in code_blocks(&text) {
            let mut info = block.info.split(|c: char| c == ',' || c.is_whitespace());
            if info.next() != Some("toml") {
                continue;
            }
            let args: Vec<&str> = info.collect();
            let result = if args.contains(&"partial") {
                check_partial(&block.text)
            } else if args.contains(&"host") {
                check_host(&block.text)
            } else {
                check_complete(&block.text)
            };
            if let Err(e) = result {
                panic!(
                    "{}:{}: a `{}` block that the node-file loader refuses: {e}\n{}",
                    page.display(),
                    block.line,
                    block.info,
                    block.text
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} toml blocks found");
}

/// The keys the node-file loader knows, as its error for an unknown key
/// lists them (`extra` goes where an unknown key is tried).
fn known_keys(extra: &str) -> Vec<String> {
    let text = format!(
        "id = 1\ncluster_id = 1\nlisten = \"127.0.0.1:1\"\ndata_dir = \"d\"\n{extra}zz_unknown = 1\n"
    );
    let e = NodeFile::parse(&text).expect_err("an unknown key is refused");
    let list = e
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("{e}"));
    list.split(", ")
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect()
}

/// Running nodes' table of node-file keys names every key the loader
/// knows, and no other.
#[test]
fn the_node_file_table_lists_every_key() {
    let page = std::fs::read_to_string(root().join("docs/src/running-nodes.md")).unwrap();
    // The section "The node file", up to its first subsection: other
    // tables of the page list commands and outputs, not keys.
    let (_, section) = page.split_once("## The node file").unwrap();
    let section = section.split("\n#").next().unwrap();
    let mut listed: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(k, _)| k))
        .filter(|k| !k.starts_with("--") && !k.starts_with('-'))
        .map(|k| {
            if k == "[[peers]]" {
                "peers".into()
            } else {
                k.to_string()
            }
        })
        .collect();
    let mut known = known_keys("");
    known.extend(
        known_keys("[[peers]]\nid = 2\naddr = \"127.0.0.1:2\"\n")
            .into_iter()
            .map(|k| format!("peers.{k}")),
    );
    listed.sort();
    known.sort();
    assert_eq!(listed, known, "docs/src/running-nodes.md's key table");
}

/// The book's Rust examples run as doctests only if `src/lib.rs` includes
/// their page.
#[test]
fn every_book_page_with_rust_examples_is_a_doctest() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    for page in files_under(&root().join("docs/src"), ".md") {
        let text = std::fs::read_to_string(&page).unwrap();
        if !code_blocks(&text).iter().any(|b| b.info == "rust") {
            continue;
        }
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            lib.contains(&format!("include_str!(\"../docs/src/{name}\")")),
            "docs/src/{name} has Rust examples: include it in src/lib.rs's BookDoctests"
        );
    }
}

/// The targets of the Markdown links `[text](target)` in `markdown`,
/// outside code blocks and inline code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(markdown) {
        // Inline code may hold `](` that is no link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// The lines of `markdown` outside fenced code blocks (and not the
/// fences).
fn prose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    markdown.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors mdBook gives the headings of `markdown`: lower case,
/// spaces to `-`, other punctuation but `-` and `_` dropped.
fn heading_anchors(markdown: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    for line in prose_lines(markdown) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let text = heading.trim_start_matches('#').trim();
        anchors.push(
            text.chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => {
                        Some(c.to_lowercase().next().unwrap_or(c))
                    }
                    _ => None,
                })
                .collect(),
        );
    }
    anchors
}

/// The book builds from `docs/src/SUMMARY.md` (`mdbook build docs`): every
/// page it lists exists and every page is listed, and every relative link
/// of the book and the README reaches a file, and a heading where it names
/// one. (`mdbook build` itself is not run by the tests: see
/// docs/src/testing.md.)
#[test]
fn the_book_lists_every_page_and_every_link_resolves() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: Vec<String> = link_targets(&summary);
    let mut pages: Vec<String> = files_under(&src, ".md")
        .iter()
        .map(|p| p.strip_prefix(&src).unwrap().to_string_lossy().into_owned())
        .filter(|p| p != "SUMMARY.md")
        .collect();
    pages.sort();
    let mut in_summary = listed.clone();
    in_summary.sort();
    assert_eq!(
        in_summary, pages,
        "docs/src/SUMMARY.md lists exactly the pages"
    );
    let mut documents = vec![root().join("README.md")];
    documents.extend(files_under(&src, ".md"));
    let mut broken = Vec::new();
    for document in documents {
        let text = std::fs::read_to_string(&document).unwrap();
        let base = document.parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                document.clone()
            } else {
                base.join(file)
            };
            let name = document.strip_prefix(root()).unwrap().display();
            if !path.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
            } else if !anchor.is_empty() && path.extension().is_some_and(|e| e == "md") {
                let heading = std::fs::read_to_string(&path).unwrap();
                if !heading_anchors(&heading).iter().any(|a| a == anchor) {
                    broken.push(format!("{name}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_systemd_units_name_existing_subcommands_and_flags() {
    let units = files_under(&root().join("examples/systemd"), ".service");
    assert_eq!(units.len(), 2, "{units:?}");
    for unit in &units {
        let text = std::fs::read_to_string(unit).unwrap();
        let name = unit.file_name().unwrap().to_string_lossy().into_owned();
        let exec: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("ExecStart="))
            .collect();
        assert_eq!(exec.len(), 1, "{name}: one ExecStart");
        let words: Vec<&str> = exec[0].split_whitespace().collect();
        assert!(words[0].ends_with("/tenure"), "{name}: {}", exec[0]);
        let sub = words[1];
        assert!(
            name.starts_with(&format!("tenure-{sub}@")),
            "{name} runs `tenure {sub}`"
        );
        let help = Command::new(BIN).args([sub, "--help"]).output().unwrap();
        assert!(
            help.status.success(),
            "{name}: `tenure {sub}` does not exist"
        );
        let help = String::from_utf8_lossy(&help.stdout);
        let ours = words[2..].iter().take_while(|w| **w != "--");
        for flag in ours.filter(|w| w.starts_with("--")) {
            let flag = flag.split('=').next().unwrap();
            assert!(
                help.contains(flag),
                "{name}: `tenure {sub}` has no flag {flag}:\n{help}"
            );
        }
        assert!(
            words.contains(&"--config") && exec[0].contains("%i"),
            "{name}: the node file of instance %i"
        );
        for line in [
            "Type=notify",
            "KillSignal=SIGTERM",
            "KillMode=mixed",
            "RestartPreventExitStatus=2",
            "ExecReload=/bin/kill -HUP $MAINPID",
        ] {
            assert!(text.lines().any(|l| l == line), "{name}: {line}");
        }
    }
}

/// A free TCP port on 127.0.0.1.
fn tcp_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The example cluster's addresses and free ones to use instead, so that
/// the test does not collide with anything using the documented ports.
fn free_addresses() -> Vec<(String, String)> {
    let mut map = Vec::new();
    for i in 1..=3 {
        map.push((
            format!("127.0.0.1:710{i}"),
            format!("127.0.0.1:{}", common::port()),
        ));
        map.push((
            format!("127.0.0.1:910{i}"),
            format!("127.0.0.1:{}", tcp_port()),
        ));
    }
    map
}

/// `text` with every documented address replaced (through placeholders, so
/// a new port can never be replaced again).
fn readdress(text: &str, map: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (n, (from, _)) in map.iter().enumerate() {
        out = out.replace(from, &format!("@ADDR{n}@"));
    }
    for (n, (_, to)) in map.iter().enumerate() {
        out = out.replace(&format!("@ADDR{n}@"), to);
    }
    out
}

/// A copy of the repository's `examples/cluster/*.toml` below `dir`, as
/// `dir/examples/cluster/`, on the addresses of `map`.
fn copy_cluster(dir: &Path, map: &[(String, String)]) -> Vec<PathBuf> {
    let to = dir.join("examples/cluster");
    std::fs::create_dir_all(&to).unwrap();
    files_under(&root().join("examples/cluster"), ".toml")
        .iter()
        .map(|from| {
            let text = std::fs::read_to_string(from).unwrap();
            let copy = to.join(from.file_name().unwrap());
            std::fs::write(&copy, readdress(&text, map)).unwrap();
            copy
        })
        .collect()
}

#[test]
fn the_example_cluster_elects_a_leader() {
    let dir = common::dir("examples");
    let configs = copy_cluster(&dir, &free_addresses());
    std::fs::create_dir_all(dir.join("examples/cluster/data")).unwrap();
    keygen(&dir.join("examples/cluster/data/cluster.key"));
    let nodes: Vec<Proc> = configs.iter().map(|c| Proc::start(c)).collect();
    until("a leader with a lease that every node knows", || {
        let all: Vec<_> = configs.iter().filter_map(|c| status(c)).collect();
        all.len() == 3
            && all
                .iter()
                .any(|s| s["role"] == "leader" && s["lease"] == true)
            && all
                .iter()
                .all(|s| s["leader"].is_u64() && s["leader"] == all[0]["leader"])
    });
    let leader = status(&configs[0]).unwrap()["leader"].as_u64().unwrap();
    assert!((1..=3).contains(&leader));
    for mut node in nodes {
        node.signal("-TERM");
        let code = common::exit_within(&mut node.child, Duration::from_secs(10), "graceful stop");
        assert!(code.success(), "{code}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every live process that runs in `dir` or names it on its command line
/// (a node the walk-through started), by pid.
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"));
            cwd.is_ok_and(|c| c.starts_with(dir))
                || std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

#[test]
fn the_operations_walkthrough_runs_as_written() {
    let page = std::fs::read_to_string(root().join("docs/src/walkthrough.md")).unwrap();
    let blocks: Vec<Block> = code_blocks(&page)
        .into_iter()
        .filter(|b| b.info == "sh")
        .collect();
    assert!(blocks.len() >= 5, "the walk-through's command blocks");
    let map = free_addresses();
    let script: String = blocks
        .iter()
        .map(|b| {
            format!(
                "# walkthrough.md line {}\n{}",
                b.line,
                readdress(&b.text, &map)
            )
        })
        .collect();

    // The repository root as the walk-through sees it: the example files,
    // and `tenure` on the PATH.
    let dir = common::dir("walkthrough");
    copy_cluster(&dir, &map);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("tenure")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    use std::os::unix::process::CommandExt;
    let mut shell = Command::new("bash")
        .arg("-c")
        .arg(format!("set -euo pipefail\n{script}"))
        .current_dir(&dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: the nodes it starts in the background
        // are in it too, and are killed with it below.
        .process_group(0)
        .spawn()
        .unwrap();
    let out = lines_of(shell.stdout.take().unwrap());
    let err = lines_of(shell.stderr.take().unwrap());
    let limit = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = shell.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever is left: the shell's process group, then any process that
    // still runs from this directory.
    let group = format!("-{}", shell.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).output();
    let _ = shell.kill();
    let _ = shell.wait();
    for pid in processes_under(&dir) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .output();
    }
    std::thread::sleep(Duration::from_millis(200));
    let stdout: Vec<String> = out.try_iter().collect();
    let stderr: Vec<String> = err.try_iter().collect();
    let logs: String = (1..=3)
        .map(|i| {
            let log = dir.join(format!("examples/cluster/data/node-{i}.log"));
            format!(
                "--- node-{i}.log\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        })
        .collect();
    let shown = format!(
        "--- stdout\n{}\n--- stderr\n{}\n{logs}",
        stdout.join("\n"),
        stderr.join("\n")
    );
    let left = processes_under(&dir);
    assert!(left.is_empty(), "processes left running: {left:?}");
    let status = status.unwrap_or_else(|| panic!("the walk-through took over 120 s\n{shown}"));
    assert!(
        status.success(),
        "the walk-through failed: {status}\n{shown}"
    );
    let all = stdout.join("\n");
    for expected in [
        "transfer_completed",
        "leads",
        "\"stopped\"",
        "tenure_is_leader",
    ] {
        assert!(all.contains(expected), "no `{expected}` in\n{shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
