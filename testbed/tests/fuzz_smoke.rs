//! The fuzz targets on a stable toolchain: every cargo-fuzz target of `cnm-proto/fuzz` is a
//! plain function (`cnm-proto/fuzz/src/lib.rs`, included here), run over its kept corpus
//! (`cnm-proto/fuzz/corpus/<target>/`) and over seeded random mutations of it. The long
//! coverage-guided campaign is `scripts/fuzz.sh` (nightly features, libFuzzer).
//!
//! `FUZZ_SMOKE_ITERS` sets the mutated inputs per target (default 30 000: a few seconds in all on a
//! busy two-core machine); the seed is fixed, so a failure is reproduced by running the test
//! again, and the failing input is printed in hex.
#![allow(clippy::unwrap_used)]

#[path = "../../cnm-proto/fuzz/src/lib.rs"]
mod fuzz_bodies;

use cnm_proto::rng::Rng;
use std::path::{Path, PathBuf};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cnm-proto/fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Runs `body` on `input`; on a panic, prints the input and fails.
fn run(target: &str, body: fn(&[u8]), input: &[u8], what: &str) {
    let r = std::panic::catch_unwind(|| body(input));
    if r.is_err() {
        let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
        panic!("fuzz target {target} failed on {what}: {hex}");
    }
}

/// One random edit of `v`: flip, set, insert, delete, truncate, duplicate a run, or splice in
/// a piece of `other`.
fn mutate(rng: &mut Rng, v: &mut Vec<u8>, other: &[u8]) {
    let pick = |rng: &mut Rng, n: usize| (rng.next_u64() % (n as u64).max(1)) as usize;
    match rng.next_u64() % 7 {
        0 if !v.is_empty() => {
            let i = pick(rng, v.len());
            v[i] ^= 1 << (rng.next_u64() % 8);
        }
        1 if !v.is_empty() => {
            let i = pick(rng, v.len());
            v[i] = [0, 0xff, 0x7f, 0x80, 0x3f, rng.next_u64() as u8][pick(rng, 6)];
        }
        2 => {
            let i = pick(rng, v.len() + 1);
            v.insert(i, rng.next_u64() as u8);
        }
        3 if !v.is_empty() => {
            let i = pick(rng, v.len());
            v.remove(i);
        }
        4 => {
            let n = pick(rng, v.len() + 1);
            v.truncate(n);
        }
        5 if !v.is_empty() && v.len() < 4096 => {
            let i = pick(rng, v.len());
            let n = pick(rng, (v.len() - i).min(64)) + 1;
            let run: Vec<u8> = v[i..i + n].to_vec();
            let at = pick(rng, v.len() + 1);
            v.splice(at..at, run);
        }
        _ if !other.is_empty() => {
            let i = pick(rng, other.len());
            let n = pick(rng, other.len() - i) + 1;
            let at = pick(rng, v.len() + 1);
            v.splice(at..at, other[i..i + n].iter().copied());
        }
        _ => v.push(rng.next_u64() as u8),
    }
}

#[test]
fn every_target_has_a_corpus_and_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cnm-proto/fuzz/Cargo.toml"),
    )
    .unwrap();
    for (name, _) in fuzz_bodies::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{name}: no [[bin]] in cnm-proto/fuzz/Cargo.toml"
        );
        assert!(!corpus(name).is_empty(), "{name}: empty corpus");
    }
}

#[test]
fn corpus_and_seeded_mutations_run_clean() {
    let iters: usize = std::env::var("FUZZ_SMOKE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let mut rng = Rng::new(0xF022_5EED);
    for (name, body) in fuzz_bodies::TARGETS {
        let seeds = corpus(name);
        for (i, s) in seeds.iter().enumerate() {
            run(name, *body, s, &format!("corpus entry {i}"));
        }
        let started = std::time::Instant::now();
        for n in 0..iters {
            let mut v = seeds[n % seeds.len()].clone();
            let other = &seeds[(rng.next_u64() as usize) % seeds.len()];
            for _ in 0..1 + rng.next_u64() % 8 {
                mutate(&mut rng, &mut v, other);
            }
            run(name, *body, &v, &format!("mutation {n}"));
        }
        // Purely random inputs too.
        for n in 0..iters / 10 {
            let len = (rng.next_u64() % 256) as usize;
            let v: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            run(name, *body, &v, &format!("random input {n}"));
        }
        println!(
            "fuzz smoke {name}: {} corpus entries, {} inputs in {:?} (busy machine)",
            seeds.len(),
            seeds.len() + iters + iters / 10,
            started.elapsed()
        );
    }
}

#[test]
fn the_kept_configurations_load() {
    // The config corpora start from valid files, so that mutations reach past the parser.
    for text in corpus("switch_config") {
        let cfg: cp_switch::BridgeConfig =
            toml::from_str(std::str::from_utf8(&text).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        cfg.validate().unwrap();
    }
    for text in corpus("agent_config") {
        let cfg: rp_agent::config::AgentConfig =
            toml::from_str(std::str::from_utf8(&text).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        cfg.validate().unwrap();
    }
}
