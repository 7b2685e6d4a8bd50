//! `glassbox bench`: a load generator for `glassbox serve`.
//!
//! The flags ([`args`]) are resolved into a validated
//! `glassbox_bench::load::Config` ([`resolve`]); the library runs the load
//! (closed or open loop, the trace check; see `glassbox_bench::load`), and
//! the report is printed through the output layer (`crate::out`) as a
//! table ([`report`]) or JSON. `bench chat` and `bench llm` take the same
//! four steps.

mod args;
pub mod chat;
mod duration;
mod errors;
pub mod llm;
mod report;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use glassbox_bench::load::{Bench, Config, Load, OpenLoop, Stop, input, parse_inputs};
use glassbox_bench::stats::Buckets;
use serde_json::json;

pub use self::args::{Args, Sub};
use self::errors::{bench_error, usage};
use self::report::table;
use crate::exit::{self, Coded};
use crate::out::Out;
use crate::out::progress::{Bar, Length};

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Llm(a)) => return llm::run(*a),
        Some(Sub::Chat(a)) => return chat::run(*a),
        None => {}
    }
    let out = Out::new(args.format);
    let config = resolve(&args)?;
    let bench = Bench::connect(config).map_err(bench_error)?;
    let done = Arc::new(AtomicU64::new(0));
    let length = match bench.config().stop {
        Stop::After(d) => Length::Millis(millis(d + bench.config().warmup)),
        Stop::Count(n) => Length::Count(n),
    };
    let bar = Bar::start(out.shows_progress(), done.clone(), length, "requests");
    let report = bench.run(&done);
    bar.finish();
    out.result(&report, || table(&report))?;
    if report.unanswered() {
        return Ok(ExitCode::from(exit::UNAVAILABLE));
    }
    Ok(if report.traces_incomplete() {
        ExitCode::from(exit::FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The flags as a validated load run: a bad option is a usage error (exit
/// 2), a bad inputs file or bucket list exit 78.
pub fn resolve(args: &Args) -> anyhow::Result<Config> {
    let buckets = Buckets::new(args.buckets.clone()).map_err(Coded::invalid)?;
    let inputs = match &args.inputs {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Coded::invalid(format!("cannot read `{path}`: {e}")))?;
            parse_inputs(path, &text, &buckets).map_err(bench_error)?
        }
        None => args
            .question
            .iter()
            .map(|q| input(&json!({ "question": q }), &buckets))
            .collect(),
    };
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(usage(format!("`--rate` must be above 0, got {rate}")));
    }
    for (flag, zero) in [
        ("--concurrency", args.concurrency == Some(0)),
        ("--max-in-flight", args.max_in_flight == Some(0)),
        ("--requests", args.requests == Some(0)),
    ] {
        if zero {
            return Err(usage(format!("`{flag}` is 0: it must be at least 1")));
        }
    }
    let stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Count(n),
        (None, Some(d)) => Stop::After(d),
        (None, None) => Stop::After(Duration::from_secs(10)),
    };
    if matches!(stop, Stop::After(d) if d.is_zero()) {
        return Err(usage("`--duration` must be above 0".into()));
    }
    let load = match args.rate {
        Some(rate) => Load::Open(OpenLoop {
            rate,
            arrivals: args.arrivals.into(),
            senders: args.max_in_flight.unwrap_or_else(|| {
                ((rate * args.timeout.as_secs_f64()).ceil() as usize).clamp(16, 512)
            }),
            seed: args.seed,
        }),
        None => Load::Closed {
            clients: args.concurrency.unwrap_or(1),
        },
    };
    Ok(Config {
        url: args.url.clone(),
        topology: args.topology.clone().unwrap_or_default(),
        api_key: args.api_key.clone(),
        inputs,
        buckets,
        load,
        stop,
        warmup: args.warmup,
        timeout: args.timeout,
        verify_traces: args.verify_traces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        crate::cmd::common::parse_flags(&["bench", "--topology", "t"], extra)
    }

    #[test]
    fn flags_resolve_to_an_open_or_closed_load() {
        let c = resolve(&args(&["-q", "hi", "--rate", "10", "--timeout", "5s"])).unwrap();
        let Load::Open(open) = c.load else {
            panic!("{:?}", c.load)
        };
        // rate × timeout, at least 16 senders.
        assert_eq!((open.rate, open.senders), (10.0, 50));
        assert_eq!(c.stop, Stop::After(Duration::from_secs(10)));
        let c = resolve(&args(&["-q", "hi", "-n", "7"])).unwrap();
        assert_eq!(c.load, Load::Closed { clients: 1 });
        assert_eq!(c.stop, Stop::Count(7));
        assert_eq!(c.inputs.len(), 1);
    }

    #[test]
    fn bad_options_are_usage_errors_and_bad_buckets_invalid() {
        for bad in [
            &["--rate", "0"][..],
            &["--requests", "0"],
            &["--concurrency", "0"],
            &["--duration", "0s"],
        ] {
            let mut a = vec!["-q", "hi"];
            a.extend_from_slice(bad);
            let err = resolve(&args(&a)).unwrap_err();
            assert_eq!(exit::code_for(&err), exit::USAGE, "{bad:?}: {err}");
        }
        let err = resolve(&args(&["-q", "hi", "--buckets", "64,8"])).unwrap_err();
        assert_eq!(exit::code_for(&err), exit::INVALID, "{err}");
    }
}
