//! The OTLP trace messages, as `prost` structs written by hand, that also
//! read the OTLP/JSON encoding through `serde`.
//!
//! Only the fields Glassbox reads are declared (links, trace state, flags
//! and dropped counts are skipped as unknown fields, which protobuf and the
//! OTLP/JSON rules both allow). Field numbers are those of
//! `opentelemetry/proto/{collector/trace/v1,trace/v1,common/v1,resource/v1}`.
//! Writing the dozen messages here instead of generating them keeps
//! `protoc` and a build script out of this crate (the `opentelemetry-proto`
//! crate would also bring its tonic stack); the JSON rules of OTLP
//! (lowerCamelCase names, hex trace and span ids, 64-bit integers as
//! strings or numbers, enums as integers) are the serde attributes below.

use serde::{Deserialize, Deserializer};

/// `ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    #[serde(default)]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse`.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

/// `ExportTracePartialSuccess`: spans refused, and why.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    #[serde(serialize_with = "int_as_string")]
    pub rejected_spans: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

fn int_as_string<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    #[serde(default)]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    #[serde(default)]
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    #[serde(default)]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    #[serde(default)]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    #[serde(default)]
    pub spans: Vec<Span>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    #[serde(default)]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(default)]
    pub version: String,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(default, deserialize_with = "hex_id")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(default, deserialize_with = "hex_id")]
    pub span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    #[serde(default, deserialize_with = "hex_id")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    #[serde(default)]
    pub name: String,
    /// `SpanKind`: 0 unspecified, 1 internal, 2 server, 3 client, 4
    /// producer, 5 consumer.
    #[prost(int32, tag = "6")]
    #[serde(default, deserialize_with = "enum_int")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    #[serde(default, deserialize_with = "uint64")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    #[serde(default, deserialize_with = "uint64")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    #[serde(default)]
    pub attributes: Vec<KeyValue>,
    #[prost(message, repeated, tag = "11")]
    #[serde(default)]
    pub events: Vec<Event>,
    #[prost(message, optional, tag = "15")]
    #[serde(default)]
    pub status: Option<Status>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[prost(fixed64, tag = "1")]
    #[serde(default, deserialize_with = "uint64")]
    pub time_unix_nano: u64,
    #[prost(string, tag = "2")]
    #[serde(default)]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    #[serde(default)]
    pub attributes: Vec<KeyValue>,
}

/// `Status.code`: 0 unset, 1 ok, 2 error.
pub const STATUS_ERROR: i32 = 2;

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[prost(string, tag = "2")]
    #[serde(default)]
    pub message: String,
    #[prost(int32, tag = "3")]
    #[serde(default, deserialize_with = "enum_int")]
    pub code: i32,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    #[serde(default)]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    #[serde(default)]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(from = "AnyValueJson")]
pub struct AnyValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<Value>,
}

/// The value of an attribute.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
    #[prost(message, tag = "5")]
    Array(ArrayValue),
    #[prost(message, tag = "6")]
    Kvlist(KeyValueList),
    #[prost(bytes = "vec", tag = "7")]
    Bytes(Vec<u8>),
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    #[serde(default)]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    #[serde(default)]
    pub values: Vec<KeyValue>,
}

/// `AnyValue` in OTLP/JSON: one of these keys.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyValueJson {
    string_value: Option<String>,
    bool_value: Option<bool>,
    #[serde(default, deserialize_with = "opt_int64")]
    int_value: Option<i64>,
    double_value: Option<f64>,
    array_value: Option<ArrayValue>,
    kvlist_value: Option<KeyValueList>,
    bytes_value: Option<String>,
}

impl From<AnyValueJson> for AnyValue {
    fn from(j: AnyValueJson) -> AnyValue {
        let value = if let Some(s) = j.string_value {
            Some(Value::String(s))
        } else if let Some(b) = j.bool_value {
            Some(Value::Bool(b))
        } else if let Some(i) = j.int_value {
            Some(Value::Int(i))
        } else if let Some(d) = j.double_value {
            Some(Value::Double(d))
        } else if let Some(a) = j.array_value {
            Some(Value::Array(a))
        } else if let Some(k) = j.kvlist_value {
            Some(Value::Kvlist(k))
        } else {
            // Bytes (base64 in JSON) are kept as their text: Glassbox never
            // reads binary attributes, only shows them.
            j.bytes_value.map(Value::String)
        };
        AnyValue { value }
    }
}

/// A number written as a JSON number or a string (OTLP/JSON writes 64-bit
/// integers as strings; some exporters write numbers).
#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrText {
    U(u64),
    I(i64),
    F(f64),
    T(String),
}

fn uint64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match NumOrText::deserialize(d)? {
        NumOrText::U(u) => Ok(u),
        NumOrText::T(t) => t.parse().map_err(|_| {
            serde::de::Error::custom(format!("`{t}` is not an unsigned 64-bit integer"))
        }),
        NumOrText::I(i) => Err(serde::de::Error::custom(format!("`{i}` is negative"))),
        NumOrText::F(f) => Err(serde::de::Error::custom(format!("`{f}` is not an integer"))),
    }
}

fn opt_int64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match NumOrText::deserialize(d)? {
        NumOrText::I(i) => Ok(Some(i)),
        NumOrText::U(u) => i64::try_from(u)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{u}` is out of range for int64"))),
        NumOrText::T(t) => t
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}` is not a 64-bit integer"))),
        NumOrText::F(f) => Err(serde::de::Error::custom(format!("`{f}` is not an integer"))),
    }
}

/// Enums in OTLP/JSON are integers; the names (`SPAN_KIND_CLIENT`,
/// `STATUS_CODE_ERROR`) are accepted too.
fn enum_int<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    match NumOrText::deserialize(d)? {
        NumOrText::U(u) => i32::try_from(u).map_err(serde::de::Error::custom),
        NumOrText::I(i) => i32::try_from(i).map_err(serde::de::Error::custom),
        NumOrText::T(t) => Ok(match t.as_str() {
            "SPAN_KIND_INTERNAL" | "STATUS_CODE_OK" => 1,
            "SPAN_KIND_SERVER" | "STATUS_CODE_ERROR" => 2,
            "SPAN_KIND_CLIENT" => 3,
            "SPAN_KIND_PRODUCER" => 4,
            "SPAN_KIND_CONSUMER" => 5,
            _ => 0,
        }),
        NumOrText::F(f) => Err(serde::de::Error::custom(format!(
            "`{f}` is not an enum value"
        ))),
    }
}

/// Trace and span ids are lowercase hex in OTLP/JSON (not base64).
fn hex_id<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    if s.len() % 2 != 0 {
        return Err(serde::de::Error::custom(format!(
            "id `{s}` is not hex (an odd number of digits)"
        )));
    }
    (0..s.len() / 2)
        .map(|i| {
            s.get(2 * i..2 * i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "id `{s}` is not hex (hint: OTLP/JSON writes trace and span ids as hex, not base64)"
                    ))
                })
        })
        .collect()
}
