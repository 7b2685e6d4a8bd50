//! Measured results: the CSV format, and the planner's prediction for a row.
//!
//! The same format serves the shipped validation set
//! (`data/measurements.csv`) and a user's own runs for
//! `glassbox plan calibrate`. Columns:
//!
//! `id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes`
//!
//! Metrics: `decode_tok_s` (decode tokens/s per sequence at `batch`),
//! `prefill_tok_s` (prompt tokens/s of one prompt), `ttft_ms` (one prompt),
//! `serving_tok_s` (output tokens/s per GPU with `batch` requests of
//! `prompt_tokens` in, `gen_tokens` out in flight: a closed-loop benchmark or
//! a static batch; the engine's caps decide how many run, see
//! [`crate::batching`]).

use std::path::Path;

use serde::Serialize;

use crate::batching;
use crate::efficiency::{Engine, Phase};
use crate::error::PlannerError;
use crate::estimate::{Estimator, Scenario};
use crate::hardware::HardwareCatalogue;
use crate::model::ModelCatalogue;
use crate::parallel;
use crate::quant::Quant;

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    DecodeTokS,
    PrefillTokS,
    TtftMs,
    ServingTokS,
}

impl Metric {
    pub const ALL: [Self; 4] = [
        Self::DecodeTokS,
        Self::PrefillTokS,
        Self::TtftMs,
        Self::ServingTokS,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DecodeTokS => "decode_tok_s",
            Self::PrefillTokS => "prefill_tok_s",
            Self::TtftMs => "ttft_ms",
            Self::ServingTokS => "serving_tok_s",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The phase a metric calibrates; serving throughput mixes both and is
    /// kept for validation only.
    pub fn phase(self) -> Option<Phase> {
        match self {
            Self::DecodeTokS => Some(Phase::Decode),
            Self::PrefillTokS | Self::TtftMs => Some(Phase::Prefill),
            Self::ServingTokS => None,
        }
    }
}

/// One measured result.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub line: usize,
    pub id: String,
    pub metric: Metric,
    pub value: f64,
    pub gpu: String,
    pub tp: u32,
    pub engine: Engine,
    pub model: String,
    pub quant: String,
    pub kv_bytes: f64,
    pub batch: u32,
    pub prompt_tokens: u64,
    pub gen_tokens: u64,
    pub source: String,
}

const COLUMNS: [&str; 14] = [
    "id",
    "metric",
    "value",
    "gpu",
    "tp",
    "engine",
    "model",
    "quant",
    "kv_dtype",
    "batch",
    "prompt_tokens",
    "gen_tokens",
    "source",
    "notes",
];

/// Splits one CSV record (RFC 4180 quoting, no embedded newlines).
fn split_record(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match (ch, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// Parses measurements CSV text, collecting every bad row before failing.
pub fn parse_csv(text: &str, origin: &str) -> Result<Vec<Measurement>, PlannerError> {
    let csv_err = |line: usize, message: String| PlannerError::Csv {
        origin: origin.to_string(),
        line,
        message,
    };
    let mut lines = text.lines().enumerate().filter(|(_, l)| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    });
    let (hline, header) = lines
        .next()
        .ok_or_else(|| csv_err(1, "empty file".into()))?;
    let header = split_record(header).map_err(|m| csv_err(hline + 1, m))?;
    let mut idx = [0usize; 14];
    for (i, col) in COLUMNS.iter().enumerate() {
        idx[i] = header
            .iter()
            .position(|h| h.trim() == *col)
            .ok_or_else(|| csv_err(hline + 1, format!("missing column `{col}`")))?;
    }
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (n, line) in lines {
        match parse_row(line, n + 1, &idx) {
            Ok(m) => rows.push(m),
            Err(msg) => problems.push(format!("line {}: {msg}", n + 1)),
        }
    }
    if !problems.is_empty() {
        let first_line = problems.len();
        return Err(csv_err(
            0,
            format!("{first_line} bad row(s): {}", problems.join("; ")),
        ));
    }
    Ok(rows)
}

fn parse_row(line: &str, n: usize, idx: &[usize; 14]) -> Result<Measurement, String> {
    let f = split_record(line)?;
    let get = |i: usize| f.get(idx[i]).map(|s| s.trim()).unwrap_or("");
    let num = |i: usize| -> Result<f64, String> {
        get(i)
            .parse::<f64>()
            .map_err(|_| format!("`{}` is not a number: `{}`", COLUMNS[i], get(i)))
    };
    let int = |i: usize| -> Result<u64, String> {
        get(i)
            .parse::<u64>()
            .map_err(|_| format!("`{}` is not an integer: `{}`", COLUMNS[i], get(i)))
    };
    let metric = Metric::parse(get(1)).ok_or_else(|| format!("unknown metric `{}`", get(1)))?;
    let value = num(2)?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("value must be positive, got {value}"));
    }
    let kv_bytes = match get(8).to_ascii_lowercase().as_str() {
        "" | "fp16" | "f16" | "bf16" => 2.0,
        "fp8" | "int8" | "q8_0" => 1.0,
        "fp32" | "f32" => 4.0,
        other => return Err(format!("unknown kv_dtype `{other}`")),
    };
    let tp = u32::try_from(int(4)?).map_err(|_| "tp too big".to_string())?;
    let batch = u32::try_from(int(9)?).map_err(|_| "batch too big".to_string())?;
    if tp == 0 || batch == 0 {
        return Err("tp and batch must be >= 1".into());
    }
    Ok(Measurement {
        line: n,
        id: get(0).to_string(),
        metric,
        value,
        gpu: get(3).to_string(),
        tp,
        engine: Engine::parse(get(5)).map_err(|e| e.to_string())?,
        model: get(6).to_string(),
        quant: get(7).to_string(),
        kv_bytes,
        batch,
        prompt_tokens: int(10)?,
        gen_tokens: int(11)?,
        source: get(12).to_string(),
    })
}

/// Reads a measurements CSV file.
pub fn read_csv(path: &Path) -> Result<Vec<Measurement>, PlannerError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlannerError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_csv(&text, &path.display().to_string())
}

/// The shipped validation set.
pub fn builtin() -> Result<Vec<Measurement>, PlannerError> {
    parse_csv(
        include_str!("../data/measurements.csv"),
        "data/measurements.csv",
    )
}

/// Every public row the project holds: the shipped validation set plus
/// GPUStack's serving rows, which are kept out of it (docs/planner.md,
/// "GPUStack's serving rows") but count in the accuracy bands
/// ([`crate::accuracy`]).
pub fn all_public() -> Result<Vec<Measurement>, PlannerError> {
    let mut rows = builtin()?;
    rows.extend(parse_csv(
        include_str!("../data/measurements-gpustack.csv"),
        "data/measurements-gpustack.csv",
    )?);
    Ok(rows)
}

/// See [`Measurement::source_key`].
pub fn source_key(source: &str) -> String {
    let Some(start) = source.find("https://").or_else(|| source.find("http://")) else {
        return source.trim().to_string();
    };
    let url = source[start..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_end_matches([',', ';', ')', '.']);
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let mut parts = rest.split('/').filter(|p| !p.is_empty());
    let host = parts.next().unwrap_or_default().to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host).to_string();
    let path: Vec<&str> = parts.collect();
    // A thread (issue, pull request, discussion) is its author's own
    // publication, measured on their machines: a source of its own.
    if let ("github.com", [owner, repo, kind, number, ..]) = (host.as_str(), path.as_slice())
        && let Some(n) = thread_number(kind, number)
    {
        return format!("github.com/{owner}/{repo}/{kind}/{n}").to_ascii_lowercase();
    }
    match host.as_str() {
        "github.com" | "raw.githubusercontent.com" if path.len() >= 2 => {
            format!("github.com/{}/{}", path[0], path[1]).to_ascii_lowercase()
        }
        _ => {
            let p = path.join("/");
            let p = p.split(['?', '#']).next().unwrap_or_default();
            format!("{host}/{p}")
                .trim_end_matches('/')
                .to_ascii_lowercase()
        }
    }
}

/// The thread number where `kind/number` after a GitHub repository names
/// a thread (an anchor or query after it dropped).
fn thread_number<'a>(kind: &str, number: &'a str) -> Option<&'a str> {
    let number = number.split(['?', '#']).next().unwrap_or_default();
    let thread = matches!(kind, "issues" | "pull" | "discussions")
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit());
    thread.then_some(number)
}

/// Catalogues a row is resolved against.
#[derive(Debug, Clone, Copy)]
pub struct Catalogues<'a> {
    pub hardware: &'a HardwareCatalogue,
    pub models: &'a ModelCatalogue,
}

impl Measurement {
    /// The scenario the row describes.
    pub fn scenario<'a>(&self, cat: Catalogues<'a>) -> Result<Scenario<'a>, PlannerError> {
        let hw = cat.hardware.get(&self.gpu)?;
        let model = cat.models.get(&self.model)?;
        let quant = Quant::parse(&self.quant)?;
        // The `tp` column is the GPUs the run used; they are split the way
        // the engine splits them by default (llama.cpp: layers).
        let fits_one = model.weight_bytes(&quant, self.engine) < hw.memory_bytes();
        let (tp, pp) = parallel::replica_split(self.engine, self.tp, fits_one);
        Ok(Scenario {
            model,
            hw,
            quant,
            kv_bytes: self.kv_bytes,
            engine: self.engine,
            tp,
            pp,
            batch: self.batch,
            prompt_tokens: self.prompt_tokens.max(1),
            gen_tokens: self.gen_tokens,
            context: (self.prompt_tokens + self.gen_tokens).max(1),
            // What the engine itself leaves free (vLLM's 0.9 memory
            // utilisation, ...), not a planning headroom.
            memory_headroom: self.engine.profile(hw).memory_reserve,
            ubatch: None,
        })
    }

    /// The publisher a row comes from, for leave-one-source-out: the
    /// `owner/repo` of a GitHub URL in `source`, else the URL's host and
    /// path, else the whole field. Sibling tables of one publication (and
    /// one repository's releases) are one source.
    pub fn source_key(&self) -> String {
        source_key(&self.source)
    }

    /// Decode context: llama-bench `tg N` starts empty and grows to N.
    pub fn decode_ctx(&self) -> f64 {
        self.prompt_tokens as f64 + self.gen_tokens as f64 / 2.0
    }

    /// The measured time the row implies for its phase, seconds.
    pub fn measured_time_s(&self) -> f64 {
        match self.metric {
            Metric::DecodeTokS => 1.0 / self.value,
            Metric::PrefillTokS => self.prompt_tokens as f64 / self.value,
            Metric::TtftMs => self.value / 1e3,
            Metric::ServingTokS => f64::from(self.batch) * self.gen_tokens as f64 / self.value,
        }
    }

    /// What of the measured time is the server path at the row's prompt
    /// ([`Estimator::server_path_s`]): in a TTFT, none in a rate.
    pub fn server_path_s(&self, est: &Estimator, s: &Scenario) -> f64 {
        if self.metric == Metric::TtftMs {
            est.server_path_s(s, self.prompt_tokens as f64)
        } else {
            0.0
        }
    }

    /// The planner's prediction of `value` with the given estimator.
    pub fn predict(&self, est: &Estimator, cat: Catalogues) -> Result<f64, PlannerError> {
        let s = self.scenario(cat)?;
        let prompt = self.prompt_tokens as f64;
        let b = f64::from(self.batch);
        Ok(match self.metric {
            Metric::DecodeTokS => 1.0 / est.tpot_s(&s, b, self.decode_ctx()),
            Metric::PrefillTokS => prompt / est.prefill_pass_s(&s, prompt),
            Metric::TtftMs => (est.prefill_pass_s(&s, prompt) + self.server_path_s(est, &s)) * 1e3,
            Metric::ServingTokS => {
                batching::output_tok_s(est, &s, b, prompt, self.gen_tokens as f64)
                    / f64::from(self.tp)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_and_errors() {
        assert_eq!(
            split_record(r#"a,"b,c","d""e""#).unwrap(),
            vec!["a", "b,c", "d\"e"]
        );
        assert!(split_record(r#"a,"b"#).is_err());
        let text = "id,metric,value,gpu,tp,engine,model,quant,kv_dtype,batch,prompt_tokens,gen_tokens,source,notes\n\
                    r1,decode_tok_s,100,rtx-4090,1,llama.cpp,llama-2-7b,q4_0,,1,0,128,x,\n\
                    r2,bogus,1,rtx-4090,1,llama.cpp,llama-2-7b,q4_0,,1,0,128,x,\n\
                    r3,decode_tok_s,-1,rtx-4090,1,llama.cpp,llama-2-7b,q4_0,,1,0,128,x,\n";
        let e = parse_csv(text, "m.csv").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("line 4"), "{e}");
    }

    #[test]
    fn source_keys_group_a_publication() {
        assert_eq!(
            source_key("X README (May 2024) https://github.com/A/B, notes"),
            "github.com/a/b"
        );
        assert_eq!(
            source_key("v0.9 https://github.com/NVIDIA/TensorRT-LLM/blob/v0.9.0/docs/x.md"),
            source_key("https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/v1/docs/y.md")
        );
        assert_eq!(
            source_key("blog https://www.example.com/p/post?utm=1"),
            "example.com/p/post"
        );
        assert_eq!(source_key("lab notebook"), "lab notebook");
        // Threads of one repository are their authors' own publications;
        // the repository's files stay one source.
        let thread = source_key("https://github.com/ggml-org/llama.cpp/discussions/15396#x");
        assert_eq!(thread, "github.com/ggml-org/llama.cpp/discussions/15396");
        assert_ne!(
            source_key("https://github.com/ggml-org/llama.cpp/pull/4766"),
            source_key("https://github.com/ggml-org/llama.cpp/pull/4406")
        );
        assert_eq!(
            source_key("https://github.com/ggml-org/llama.cpp/blob/master/README.md"),
            "github.com/ggml-org/llama.cpp"
        );
        assert_eq!(
            source_key("https://github.com/a/b/issues"),
            "github.com/a/b",
            "a list of threads is not a thread"
        );
    }

    #[test]
    fn builtin_set_has_forty_sourced_rows() {
        let rows = builtin().unwrap();
        assert!(rows.len() >= 40, "{}", rows.len());
        assert!(
            rows.iter().all(|r| r.source.len() > 10),
            "every row needs a source"
        );
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let cat = Catalogues {
            hardware: &hw,
            models: &models,
        };
        for r in &rows {
            r.scenario(cat).unwrap();
        }
    }
}
