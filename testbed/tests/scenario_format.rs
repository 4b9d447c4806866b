//! `docs/SCENARIO-FORMAT.md` checked against the scenario parser, so the reference cannot drift
//! from the format:
//!
//! * every ```` ```toml ```` example parses (a fragment is merged into the page's complete
//!   file first), and every ```` ```toml error ```` example fails with the message of its
//!   `# error:` line;
//! * every `--set` in the ```` ```sh ```` examples applies to the built-in scenario it names;
//! * for every table the page documents (a `### `[path]`` heading), the keys of its key table
//!   are exactly the keys the parser accepts there. The parser says which those are: a probe
//!   key put into that table is refused with serde's "unknown field `…`, expected one of …",
//!   which lists the table's fields whatever types carry them;
//! * every key whose type is a table has its own section.

use std::collections::BTreeSet;

use testbed::scenario;

const PAGE: &str = include_str!("../../docs/SCENARIO-FORMAT.md");
const PROBE: &str = "zz_probe";

/// A fenced code block: its info string and its text.
struct Block {
    info: String,
    text: String,
}

fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for line in PAGE.lines() {
        if let Some(info) = line.strip_prefix("```") {
            match cur.take() {
                Some(b) => out.push(b),
                None => {
                    cur = Some(Block {
                        info: info.trim().to_string(),
                        text: String::new(),
                    })
                }
            }
        } else if let Some(b) = cur.as_mut() {
            b.text.push_str(line);
            b.text.push('\n');
        }
    }
    assert!(cur.is_none(), "an unclosed code block");
    out
}

/// The page's complete file: the first TOML example with a top-level `duration`.
fn base() -> toml::Table {
    blocks()
        .iter()
        .filter(|b| b.info == "toml")
        .map(|b| toml::from_str::<toml::Table>(&b.text).expect("a TOML example"))
        .find(|t| t.contains_key("duration"))
        .expect("the page has a complete file")
}

/// `frag` merged into `base`: tables key by key, arrays of tables appended, values replaced.
fn merge(base: &mut toml::Table, frag: toml::Table) {
    for (k, v) in frag {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(f)) => merge(b, f),
            (Some(toml::Value::Array(b)), toml::Value::Array(f))
                if f.iter().all(toml::Value::is_table) =>
            {
                b.extend(f)
            }
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The text of an example: itself when complete, else merged into the complete file.
fn example_text(text: &str) -> String {
    let frag: toml::Table =
        toml::from_str(text).unwrap_or_else(|e| panic!("example is not TOML: {e}\n{text}"));
    if frag.contains_key("duration") {
        return text.to_string();
    }
    let mut t = base();
    merge(&mut t, frag);
    toml::to_string(&t).expect("serialises")
}

fn parse(text: &str) -> Result<scenario::Scenario, String> {
    scenario::parse(text, "example.toml", "example", &[]).map_err(|e| e.to_string())
}

#[test]
fn every_toml_example_parses() {
    let examples: Vec<Block> = blocks().into_iter().filter(|b| b.info == "toml").collect();
    assert!(examples.len() >= 10, "too few examples");
    for b in &examples {
        let text = example_text(&b.text);
        if let Err(e) = parse(&text) {
            panic!("example does not parse: {e}\n{}", b.text);
        }
    }
}

#[test]
fn every_error_example_fails_with_its_message() {
    let examples: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.info == "toml error")
        .collect();
    assert!(!examples.is_empty(), "no error example");
    for b in &examples {
        let want = b
            .text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# error: "))
            .unwrap_or_else(|| panic!("an error example starts with `# error: `:\n{}", b.text));
        match parse(&example_text(&b.text)) {
            Ok(_) => panic!("example parses, expected {want:?}:\n{}", b.text),
            Err(e) => assert!(e.contains(want), "got {e:?}, expected {want:?}"),
        }
    }
}

/// Shell words of `line` (single and double quotes; no escapes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn every_set_example_applies() {
    let mut n = 0;
    for b in blocks().iter().filter(|b| b.info == "sh") {
        for line in b.text.lines().filter(|l| l.contains("--set")) {
            let w = words(line);
            let at = w
                .iter()
                .position(|x| x == "run")
                .expect("testbed run SCENARIO");
            let name = &w[at + 1];
            let sets: Vec<String> = w
                .windows(2)
                .filter(|p| p[0] == "--set")
                .map(|p| p[1].clone())
                .collect();
            let sc = scenario::load(name, &sets).unwrap_or_else(|e| panic!("{line}: {e}"));
            // The override reached the tree: each path's last key is there with its value.
            for s in &sets {
                let (k, v) = s.split_once('=').expect("KEY=VALUE");
                let last = k.rsplit('.').next().unwrap_or(k);
                let text = toml::to_string(&sc.tree).expect("serialises");
                let v = v.trim_matches('"');
                assert!(
                    text.contains(last) && text.contains(v.split(',').next().unwrap_or(v)),
                    "{s} left no trace in the tree"
                );
            }
            n += sets.len();
        }
    }
    assert!(n >= 4, "too few --set examples");
}

/// A documented table: its heading's path (`switch.NAME.bridge`, empty for the top level),
/// whether it is an array of tables, and its key rows (key, type).
struct Section {
    path: String,
    array: bool,
    rows: Vec<(String, String)>,
}

fn sections() -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut in_code = false;
    let mut cur: Option<Section> = None;
    for line in PAGE.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            out.extend(cur.take());
            let h = line.trim_start_matches('#').trim();
            if h == "Top-level keys" {
                cur = Some(Section {
                    path: String::new(),
                    array: false,
                    rows: Vec::new(),
                });
            } else if let Some(p) = h.strip_prefix("`[").and_then(|p| p.strip_suffix("]`")) {
                let array = p.starts_with('[');
                cur = Some(Section {
                    path: p.trim_matches(|c| c == '[' || c == ']').to_string(),
                    array,
                    rows: Vec::new(),
                });
            }
            continue;
        }
        if let (Some(s), Some(row)) = (cur.as_mut(), line.strip_prefix("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let key = cells[0].trim_end_matches('`').to_string();
            s.rows
                .push((key, cells.get(1).copied().unwrap_or("").to_string()));
        }
    }
    out.extend(cur);
    out
}

/// The complete file with the probe key in the table at `path` (`NAME` segments become the
/// complete file's first switch or host), parsed: the parser's list of the table's keys.
fn accepted_keys(path: &str, array: bool) -> BTreeSet<String> {
    let mut t = base();
    let first = |kind: &str| -> String {
        t.get(kind)
            .and_then(|v| v.as_table())
            .and_then(|m| m.keys().next().cloned())
            .unwrap_or_else(|| panic!("the complete file has no {kind}"))
    };
    let segs: Vec<String> = if path.is_empty() {
        Vec::new()
    } else {
        let kind = path.split('.').next().unwrap_or("").to_string();
        path.split('.')
            .map(|s| {
                if s == "NAME" {
                    first(&kind)
                } else {
                    s.to_string()
                }
            })
            .collect()
    };
    let mut probe = toml::Table::new();
    probe.insert(PROBE.into(), toml::Value::Integer(1));
    let mut frag = if array {
        toml::Value::Array(vec![toml::Value::Table(probe)])
    } else {
        toml::Value::Table(probe)
    };
    for s in segs.iter().rev() {
        let mut t = toml::Table::new();
        t.insert(s.clone(), frag);
        frag = toml::Value::Table(t);
    }
    let toml::Value::Table(frag) = frag else {
        unreachable!()
    };
    merge(&mut t, frag);
    let text = toml::to_string(&t).expect("serialises");
    let e = parse(&text).expect_err("a probe key is refused");
    let marker = format!("unknown field `{PROBE}`");
    let at = e
        .find(&marker)
        .unwrap_or_else(|| panic!("[{path}]: the probe was not refused as unknown: {e}"));
    let rest = &e[at + marker.len()..];
    // "expected one of `a`, `b`", "expected `a` or `b`", "expected `a`", "there are no fields".
    rest.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_table_lists_exactly_the_keys_the_parser_accepts() {
    let secs = sections();
    assert!(
        secs.len() >= 20,
        "too few tables documented: {}",
        secs.len()
    );
    for s in &secs {
        let documented: BTreeSet<String> = s.rows.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(documented.len(), s.rows.len(), "[{}]: a key twice", s.path);
        let accepted = accepted_keys(&s.path, s.array);
        assert!(
            !accepted.is_empty(),
            "[{}]: the parser listed no keys",
            s.path
        );
        let missing: Vec<_> = accepted.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(&accepted).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "[{}]: accepted but not documented {missing:?}; documented but not accepted {extra:?}",
            s.path
        );
    }
}

#[test]
fn every_table_valued_key_has_its_section() {
    let secs = sections();
    let paths: BTreeSet<&str> = secs.iter().map(|s| s.path.as_str()).collect();
    for s in &secs {
        for (k, ty) in &s.rows {
            if ty == "table" || ty == "array of tables" || ty.starts_with("table of") {
                let child = if s.path.is_empty() {
                    k.clone()
                } else {
                    format!("{}.{k}", s.path)
                };
                let named = format!("{child}.NAME");
                assert!(
                    paths.contains(child.as_str()) || paths.contains(named.as_str()),
                    "`{k}` of [{}] is a table without a section",
                    s.path
                );
            }
        }
    }
}

#[test]
fn shell_words() {
    assert_eq!(
        words(r#"a --set k='["1s", "2s"]' "b c""#),
        vec!["a", "--set", r#"k=["1s", "2s"]"#, "b c"]
    );
}
