//! When requests arrive and how long they are.
//!
//! Arrival processes: Poisson (independent users), gamma-distributed gaps
//! (bursty when the coefficient of variation is above 1), on/off bursts
//! (the rate concentrated into "on" periods, same average), and a replay of
//! stored timestamps (rescaled to a target rate), and a closed loop of a
//! fixed number of users, each sending its next request when its previous
//! one has finished (what `vllm bench serve --max-concurrency N` and other
//! concurrency sweeps measure). Lengths are fixed,
//! uniform, or drawn from observed values. Everything draws from one seeded
//! generator, so a seed gives the same run.

use crate::error::PlannerError;

/// An arrival process; rates are requests per second (averages).
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    Poisson {
        rate: f64,
    },
    /// Gaps from a gamma distribution with this mean rate and coefficient
    /// of variation (`cv` 1 is Poisson; above 1 is burstier).
    Gamma {
        rate: f64,
        cv: f64,
    },
    /// Poisson at `rate · (on + off) / on` during `on_s`, nothing during
    /// `off_s`, repeating: the same average rate in bursts.
    OnOff {
        rate: f64,
        on_s: f64,
        off_s: f64,
    },
    /// Stored arrival times (seconds, any origin), replayed in order with
    /// their gaps divided by `speedup`.
    Replay {
        times_s: Vec<f64>,
        speedup: f64,
    },
    /// `users` clients, each with one request in flight: a task is sent the
    /// moment another finishes (all are ready at 0), so the rate is set by
    /// the engine's speed.
    Closed {
        users: u32,
    },
}

fn positive(field: &str, v: f64) -> Result<(), PlannerError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(PlannerError::invalid(
            field,
            format!("must be a finite number above 0, got {v}"),
        ))
    }
}

impl Arrivals {
    /// A replay of `times_s` sped up (or slowed down) to average `rate`.
    pub fn replay_at(times_s: Vec<f64>, rate: f64) -> Result<Self, PlannerError> {
        positive("rate", rate)?;
        let mut times = times_s;
        times.retain(|t| t.is_finite());
        times.sort_by(f64::total_cmp);
        let (Some(first), Some(last)) = (times.first(), times.last()) else {
            return Err(PlannerError::invalid(
                "replay",
                "no stored arrival times to replay (is the trace store empty for this topology?)",
            ));
        };
        let span = last - first;
        if times.len() < 2 || span <= 0.0 {
            return Err(PlannerError::invalid(
                "replay",
                "need at least two stored requests at different times to replay",
            ));
        }
        let observed = (times.len() - 1) as f64 / span;
        Ok(Arrivals::Replay {
            times_s: times,
            speedup: rate / observed,
        })
    }

    pub fn validate(&self) -> Result<(), PlannerError> {
        match self {
            Arrivals::Poisson { rate } => positive("rate", *rate),
            Arrivals::Gamma { rate, cv } => {
                positive("rate", *rate)?;
                positive("burstiness (cv)", *cv)
            }
            Arrivals::OnOff { rate, on_s, off_s } => {
                positive("rate", *rate)?;
                positive("on period", *on_s)?;
                if off_s.is_finite() && *off_s >= 0.0 {
                    Ok(())
                } else {
                    Err(PlannerError::invalid(
                        "off period",
                        format!("must be 0 or more, got {off_s}"),
                    ))
                }
            }
            Arrivals::Closed { users } => {
                if *users >= 1 {
                    Ok(())
                } else {
                    Err(PlannerError::invalid(
                        "closed-loop users",
                        "need at least 1 user (concurrency)",
                    ))
                }
            }
            Arrivals::Replay { times_s, speedup } => {
                positive("replay speed-up", *speedup)?;
                if times_s.is_empty() {
                    Err(PlannerError::invalid("replay", "no arrival times"))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Requests in flight at most when this is a closed loop.
    pub fn users(&self) -> Option<usize> {
        match self {
            Arrivals::Closed { users } => Some(*users as usize),
            _ => None,
        }
    }

    /// The average rate, requests per second (0 for a closed loop: the
    /// engine sets it; see the report's throughput).
    pub fn mean_rate(&self) -> f64 {
        match self {
            Arrivals::Closed { .. } => 0.0,
            Arrivals::Poisson { rate } | Arrivals::Gamma { rate, .. } => *rate,
            Arrivals::OnOff { rate, .. } => *rate,
            Arrivals::Replay { times_s, speedup } => {
                let span = times_s.last().unwrap_or(&0.0) - times_s.first().unwrap_or(&0.0);
                if span > 0.0 {
                    (times_s.len().saturating_sub(1)) as f64 / span * speedup
                } else {
                    0.0
                }
            }
        }
    }

    /// `n` arrival times from 0, ascending (a replay gives at most its own
    /// number of times; a closed loop's are all 0, the earliest each could be
    /// sent: the simulator holds back all but `users` of them).
    pub fn times(&self, n: usize, rng: &mut fastrand::Rng) -> Vec<f64> {
        let mut out = Vec::with_capacity(n);
        match self {
            Arrivals::Closed { .. } => out.resize(n, 0.0),
            Arrivals::Poisson { rate } => {
                let mut t = 0.0;
                for _ in 0..n {
                    t += exponential(rng, *rate);
                    out.push(t);
                }
            }
            Arrivals::Gamma { rate, cv } => {
                let shape = 1.0 / (cv * cv);
                let scale = 1.0 / (rate * shape);
                let mut t = 0.0;
                for _ in 0..n {
                    t += gamma(rng, shape) * scale;
                    out.push(t);
                }
            }
            Arrivals::OnOff { rate, on_s, off_s } => {
                let burst = rate * (on_s + off_s) / on_s;
                let period = on_s + off_s;
                // Time inside "on" periods only, mapped onto the wall clock.
                let mut on_time = 0.0;
                for _ in 0..n {
                    on_time += exponential(rng, burst);
                    let periods = (on_time / on_s).floor();
                    out.push(periods * period + (on_time - periods * on_s));
                }
            }
            Arrivals::Replay { times_s, speedup } => {
                let first = times_s.first().copied().unwrap_or(0.0);
                out.extend(times_s.iter().take(n).map(|t| (t - first) / speedup));
            }
        }
        out
    }
}

/// Token counts of prompts or outputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Lengths {
    Fixed(u64),
    /// Uniform on `lo..=hi`.
    Uniform {
        lo: u64,
        hi: u64,
    },
    /// Drawn (with replacement) from observed values.
    Empirical(Vec<u64>),
    /// Heavy-tailed: `lo` plus an exponential of `scale` tokens, truncated
    /// at `hi`. Build it with [`Lengths::exponential`], which solves the
    /// scale for a mean: chat lengths have a long right tail, and in a
    /// saturated run the few longest requests set its duration.
    Exponential {
        lo: u64,
        hi: u64,
        scale: f64,
    },
}

impl Lengths {
    /// Lengths from `lo` to `hi` with an exponential tail whose mean, after
    /// truncation at `hi`, is `mean`. The mean must lie strictly between
    /// `lo` and the midpoint of `lo..=hi` (the flat limit of the tail).
    pub fn exponential(lo: u64, hi: u64, mean: f64, field: &str) -> Result<Self, PlannerError> {
        let (l, h) = (lo as f64, hi as f64);
        if lo < 1 || hi <= lo || !(mean > l && mean < (l + h) / 2.0) {
            return Err(PlannerError::invalid(
                field,
                format!(
                    "an exponential tail from {lo} to {hi} tokens can have a mean between {lo} and {} \
                     (exclusive), not {mean}: raise the cap or lower the mean",
                    (l + h) / 2.0
                ),
            ));
        }
        // The truncated mean grows with the scale from `lo` towards the
        // midpoint; bisect on the scale in log space.
        let (mut a, mut b) = (1e-6_f64, 1e12_f64);
        for _ in 0..200 {
            let mid = (a * b).sqrt();
            if truncated_exponential_mean(l, h, mid) < mean {
                a = mid;
            } else {
                b = mid;
            }
        }
        Ok(Lengths::Exponential {
            lo,
            hi,
            scale: (a * b).sqrt(),
        })
    }

    pub fn validate(&self, field: &str) -> Result<(), PlannerError> {
        let ok = match self {
            Lengths::Fixed(n) => *n >= 1,
            Lengths::Uniform { lo, hi } => *lo >= 1 && lo <= hi,
            Lengths::Empirical(v) => !v.is_empty() && v.iter().all(|&n| n >= 1),
            Lengths::Exponential { lo, hi, scale } => {
                *lo >= 1 && lo < hi && scale.is_finite() && *scale > 0.0
            }
        };
        if ok {
            Ok(())
        } else {
            Err(PlannerError::invalid(
                field,
                format!("lengths must be at least 1 token (and lo <= hi), got {self:?}"),
            ))
        }
    }

    pub fn draw(&self, rng: &mut fastrand::Rng) -> u64 {
        match self {
            Lengths::Fixed(n) => *n,
            Lengths::Uniform { lo, hi } => rng.u64(*lo..=*hi),
            Lengths::Empirical(v) => v[rng.usize(..v.len())],
            Lengths::Exponential { lo, hi, scale } => {
                // Inverse CDF of the exponential truncated to `hi − lo`.
                let span = (*hi - *lo) as f64;
                let kept = 1.0 - (-span / scale).exp();
                let x = -scale * (1.0 - rng.f64() * kept).ln();
                (*lo + x.round() as u64).min(*hi)
            }
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            Lengths::Fixed(n) => *n as f64,
            Lengths::Uniform { lo, hi } => (*lo + *hi) as f64 / 2.0,
            Lengths::Empirical(v) => v.iter().sum::<u64>() as f64 / v.len().max(1) as f64,
            Lengths::Exponential { lo, hi, scale } => {
                truncated_exponential_mean(*lo as f64, *hi as f64, *scale)
            }
        }
    }

    pub fn max(&self) -> u64 {
        match self {
            Lengths::Fixed(n) => *n,
            Lengths::Uniform { hi, .. } => *hi,
            Lengths::Empirical(v) => v.iter().copied().max().unwrap_or(0),
            Lengths::Exponential { hi, .. } => *hi,
        }
    }
}

/// Mean of `lo` plus an exponential of `scale` truncated at `hi`.
fn truncated_exponential_mean(lo: f64, hi: f64, scale: f64) -> f64 {
    let span = hi - lo;
    let tail = (-span / scale).exp();
    lo + scale - span * tail / (1.0 - tail)
}

/// A uniform draw in (0, 1].
fn unit(rng: &mut fastrand::Rng) -> f64 {
    1.0 - rng.f64()
}

pub(crate) fn exponential(rng: &mut fastrand::Rng, rate: f64) -> f64 {
    -unit(rng).ln() / rate
}

fn normal(rng: &mut fastrand::Rng) -> f64 {
    (-2.0 * unit(rng).ln()).sqrt() * (2.0 * std::f64::consts::PI * rng.f64()).cos()
}

/// Gamma(shape, 1) by Marsaglia and Tsang's method (shape < 1 boosted).
fn gamma(rng: &mut fastrand::Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * unit(rng).powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = unit(rng);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}
