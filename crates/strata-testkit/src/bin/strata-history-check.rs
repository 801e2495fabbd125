//! Check a history saved by a fault-harness run again, with any step budget:
//! `strata-history-check FILE [BUDGET]` (default 1,000,000,000 model steps). Prints the
//! search's counts, or the violation found, or that the budget ran out.

use std::time::Instant;

use strata_testkit::history::{History, check_within};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: strata-history-check FILE [BUDGET]");
        std::process::exit(2);
    };
    let budget = match args.get(2).map(|b| b.parse::<u64>()) {
        None => 1_000_000_000,
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            eprintln!("strata-history-check: budget {:?}: {e}", args[2]);
            std::process::exit(2);
        }
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("strata-history-check: {path}: {e}");
            std::process::exit(1);
        }
    };
    let (history, initial) = match History::load(&text) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("strata-history-check: {path}: not a saved history: {e}");
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    match check_within(&history, initial, budget) {
        Ok(stats) => println!(
            "linearizable: {} operations ({} unknown), {} steps, {:.2?}",
            stats.operations,
            stats.unknown,
            stats.steps,
            started.elapsed()
        ),
        Err(v) => {
            println!("{v}");
            println!("after {:.2?}", started.elapsed());
            std::process::exit(1);
        }
    }
}
