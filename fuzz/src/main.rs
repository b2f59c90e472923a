//! `switchboard-fuzz [TARGET|all] [--iterations N] [--seed S] [--out DIR]`:
//! the long fuzz run (README, "Fuzzing"). A finding is written to
//! `DIR/<target>-<iteration>.bin` and the run exits with status 1.

use std::process::ExitCode;

use switchboard_fuzz::targets::{TARGETS, by_name};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut which = "all".to_owned();
    let (mut iterations, mut seed, mut out) = (10_000_000u64, 1u64, ".".to_owned());
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match arg.as_str() {
            "--iterations" => iterations = value().parse().unwrap_or(iterations),
            "--seed" => seed = value().parse().unwrap_or(seed),
            "--out" => out = value(),
            "-h" | "--help" => {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                println!(
                    "switchboard-fuzz [TARGET|all] [--iterations N] [--seed S] [--out DIR]\ntargets: {}",
                    names.join(", ")
                );
                return ExitCode::SUCCESS;
            }
            name => which = name.to_owned(),
        }
    }
    let chosen: Vec<_> = if which == "all" {
        TARGETS.iter().collect()
    } else {
        match by_name(&which) {
            Some(t) => vec![t],
            None => {
                eprintln!("no target {which:?}; see --help");
                return ExitCode::FAILURE;
            }
        }
    };
    std::panic::set_hook(Box::new(|_| {}));
    for target in chosen {
        match switchboard_fuzz::run(target, iterations, seed) {
            Ok(stats) => println!(
                "{}: {} executions in {:.1?} ({:.0}/s), no panic, most allocated for one input {} bytes",
                target.name,
                stats.executions,
                stats.elapsed,
                stats.executions as f64 / stats.elapsed.as_secs_f64().max(1e-9),
                stats.peak_alloc
            ),
            Err(finding) => {
                let path = format!("{out}/{}-{}.bin", finding.target, finding.iteration);
                let _ = std::fs::write(&path, &finding.input);
                eprintln!(
                    "{}: iteration {}: {} (input in {path})",
                    finding.target, finding.iteration, finding.problem
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
