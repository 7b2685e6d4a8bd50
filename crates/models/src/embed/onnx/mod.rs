//! The BERT encoder written as an ONNX graph, straight from its safetensors.
//!
//! ONNX Runtime runs the embedder (ADR 0005), but the model ships as PyTorch
//! safetensors. Instead of an export step with torch, the encoder is small and
//! regular enough to write out here: embeddings, `layers` × (self-attention,
//! feed-forward), each followed by a residual add and layer norm. The graph is
//! built in memory at load time (a few milliseconds) and handed to ONNX
//! Runtime, whose optimiser fuses the bias adds, GELU and layer norms.
//!
//! Only the parts of the ONNX schema we write are declared ([`proto`]); field
//! numbers follow `onnx.proto`.
//!
//! Graph inputs (all built by the embedder):
//! - `input_ids`: int64 `[batch, len]`, padded with the pad id;
//! - `positions`: int64 `[len]`, `0..len`;
//! - `mask_bias`: float `[batch, 1, 1, len]`, 0 for tokens, a large negative
//!   number for padding (added to the attention scores).
//!
//! Output `hidden`: float `[batch, len, hidden]`, the last layer's states.

use safetensors::{Dtype, SafeTensors};

/// The shape of a BERT encoder, read from the model's `config.json`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct BertConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
}

fn default_act() -> String {
    "gelu".to_owned()
}

fn default_eps() -> f64 {
    1e-12
}

/// Why the graph could not be written.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("not a safetensors file: {0}")]
    Format(String),
    #[error("tensor `{name}` is missing")]
    Missing { name: String },
    #[error("tensor `{name}` has shape {actual:?}, expected {expected:?}")]
    Shape {
        name: String,
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("tensor `{name}` is {dtype:?}; only F32 weights are supported")]
    Dtype { name: String, dtype: Dtype },
    #[error("unsupported config: {0}")]
    Config(String),
}

mod parts;
pub(crate) mod proto;

use parts::{
    attr_float, attr_int, attr_ints, attr_string, dim_param, dim_value, le_f32, value_info,
};
use proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};

/// ONNX IR version 9 / opset 20: the first with a `Gelu` operator.
const IR_VERSION: i64 = 9;
const OPSET: i64 = 20;
/// ONNX Runtime's own operators (`Attention`), version 1.
const MS_DOMAIN: &str = "com.microsoft";

/// Added to the attention scores of padding positions: far below any real
/// score, yet finite, so a row of padding never turns into NaN.
pub const MASKED: f32 = -1e9;

/// Writes the ONNX model (serialised `ModelProto`) of the BERT encoder whose
/// weights are in `weights` (the bytes of a `model.safetensors`).
pub fn bert_model(
    config: &BertConfig,
    weights: &[u8],
    attention: Attention,
) -> Result<Vec<u8>, GraphError> {
    let tensors =
        SafeTensors::deserialize(weights).map_err(|e| GraphError::Format(e.to_string()))?;
    let mut builder = Builder::new(config, &tensors)?;
    builder.fused = attention == Attention::Fused;
    let graph = builder.build()?;
    let mut opset_import = vec![OperatorSetIdProto {
        domain: String::new(),
        version: OPSET,
    }];
    if attention == Attention::Fused {
        opset_import.push(OperatorSetIdProto {
            domain: MS_DOMAIN.to_owned(),
            version: 1,
        });
    }
    let model = ModelProto {
        ir_version: IR_VERSION,
        producer_name: "glassbox".to_owned(),
        producer_version: env!("CARGO_PKG_VERSION").to_owned(),
        graph: Some(graph),
        opset_import,
    };
    Ok(prost::Message::encode_to_vec(&model))
}

/// How self-attention is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// ONNX Runtime's fused `com.microsoft.Attention` kernel; input `lengths`.
    Fused,
    /// Standard operators (MatMul, Softmax, ...); input `mask_bias`.
    Standard,
}

struct Builder<'a> {
    fused: bool,
    config: &'a BertConfig,
    tensors: &'a SafeTensors<'a>,
    /// Prefix of the tensor names: `""` (sentence-transformers) or `"bert."`.
    prefix: &'static str,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
}

impl<'a> Builder<'a> {
    fn new(config: &'a BertConfig, tensors: &'a SafeTensors<'a>) -> Result<Self, GraphError> {
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(GraphError::Config(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            )));
        }
        if config.hidden_act != "gelu" {
            return Err(GraphError::Config(format!(
                "hidden_act `{}`; only `gelu` is supported",
                config.hidden_act
            )));
        }
        let prefix = if tensors
            .names()
            .iter()
            .any(|n| n.starts_with("bert.embeddings."))
        {
            "bert."
        } else {
            ""
        };
        Ok(Self {
            fused: false,
            config,
            tensors,
            prefix,
            nodes: Vec::new(),
            initializers: Vec::new(),
        })
    }

    /// The raw little-endian F32 bytes of tensor `name` (without prefix),
    /// checked against `shape`.
    fn weight(&self, name: &str, shape: &[usize]) -> Result<&'a [u8], GraphError> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .tensors
            .tensor(&full)
            .map_err(|_| GraphError::Missing { name: full.clone() })?;
        if view.dtype() != Dtype::F32 {
            return Err(GraphError::Dtype {
                name: full,
                dtype: view.dtype(),
            });
        }
        if view.shape() != shape {
            return Err(GraphError::Shape {
                name: full,
                actual: view.shape().to_vec(),
                expected: shape.to_vec(),
            });
        }
        Ok(view.data())
    }

    /// A lookup table `[rows, cols]` whose row count is not in the config
    /// (vocabulary, token types): returns the rows and the values.
    fn table(&self, name: &str, cols: usize) -> Result<(usize, &'a [u8]), GraphError> {
        let full = format!("{}{name}", self.prefix);
        let rows = match self.tensors.tensor(&full) {
            Ok(view) => match view.shape() {
                [rows, c] if *c == cols && *rows > 0 => *rows,
                other => {
                    return Err(GraphError::Shape {
                        name: full,
                        actual: other.to_vec(),
                        expected: vec![1, cols],
                    });
                }
            },
            Err(_) => return Err(GraphError::Missing { name: full }),
        };
        Ok((rows, self.weight(name, &[rows, cols])?))
    }

    /// An F32 initializer from little-endian bytes.
    fn init_f32(&mut self, name: &str, dims: &[usize], raw: &[u8]) -> String {
        self.initializers.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: proto::FLOAT,
            name: name.to_owned(),
            raw_data: raw.to_vec(),
        });
        name.to_owned()
    }

    fn init_i64(&mut self, name: &str, values: &[i64]) -> String {
        self.initializers.push(TensorProto {
            dims: vec![values.len() as i64],
            data_type: proto::INT64,
            name: name.to_owned(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name.to_owned()
    }

    /// Adds a node; returns the name of its (single) output.
    fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        output: &str,
        attributes: Vec<AttributeProto>,
    ) -> String {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| (*s).to_owned()).collect(),
            output: vec![output.to_owned()],
            name: output.to_owned(),
            op_type: op.to_owned(),
            attribute: attributes,
            domain: String::new(),
        });
        output.to_owned()
    }

    /// `x · Wᵀ + b` for a PyTorch `Linear` (weight `[out, in]`). The weight is
    /// stored as it comes; the transpose (and `scale`, when not 1) are constant
    /// subgraphs that ONNX Runtime folds once when it loads the model.
    fn linear(
        &mut self,
        x: &str,
        name: &str,
        inputs: usize,
        outputs: usize,
        scale: Option<&str>,
        out: &str,
    ) -> Result<String, GraphError> {
        let w = self.weight(&format!("{name}.weight"), &[outputs, inputs])?;
        let b = self.weight(&format!("{name}.bias"), &[outputs])?;
        let w = self.init_f32(&format!("{name}.weight"), &[outputs, inputs], w);
        let mut b = self.init_f32(&format!("{name}.bias"), &[outputs], b);
        let mut wt = self.node(
            "Transpose",
            &[&w],
            &format!("{name}.weight.t"),
            vec![attr_ints("perm", &[1, 0])],
        );
        if let Some(scale) = scale {
            wt = self.node(
                "Mul",
                &[&wt, scale],
                &format!("{name}.weight.scaled"),
                vec![],
            );
            b = self.node("Mul", &[&b, scale], &format!("{name}.bias.scaled"), vec![]);
        }
        let product = self.node("MatMul", &[x, &wt], &format!("{out}.mm"), vec![]);
        Ok(self.node("Add", &[&product, &b], out, vec![]))
    }

    fn layer_norm(&mut self, x: &str, name: &str, out: &str) -> Result<String, GraphError> {
        let h = self.config.hidden_size;
        let gamma = self.weight(&format!("{name}.weight"), &[h])?;
        let beta = self.weight(&format!("{name}.bias"), &[h])?;
        let gamma = self.init_f32(&format!("{name}.gamma"), &[h], gamma);
        let beta = self.init_f32(&format!("{name}.beta"), &[h], beta);
        Ok(self.node(
            "LayerNormalization",
            &[x, &gamma, &beta],
            out,
            vec![
                attr_int("axis", -1),
                attr_float("epsilon", self.config.layer_norm_eps as f32),
            ],
        ))
    }

    /// Self-attention from standard operators; returns the context `[b, len, h]`
    /// (before the output projection). The 1/sqrt(d) score scale is folded into
    /// the query.
    fn attention(
        &mut self,
        x: &str,
        n: &str,
        l: &str,
        split: &str,
        merge: &str,
        scale: &str,
    ) -> Result<String, GraphError> {
        let h = self.config.hidden_size;
        // Self-attention; the 1/sqrt(d) score scale is folded into the query.
        let q = self.linear(
            x,
            &format!("{n}.attention.self.query"),
            h,
            h,
            Some(scale),
            &format!("{l}.q"),
        )?;
        let k = self.linear(
            x,
            &format!("{n}.attention.self.key"),
            h,
            h,
            None,
            &format!("{l}.k"),
        )?;
        let v = self.linear(
            x,
            &format!("{n}.attention.self.value"),
            h,
            h,
            None,
            &format!("{l}.v"),
        )?;
        let q = self.node("Reshape", &[&q, split], &format!("{l}.q.split"), vec![]);
        let k = self.node("Reshape", &[&k, split], &format!("{l}.k.split"), vec![]);
        let v = self.node("Reshape", &[&v, split], &format!("{l}.v.split"), vec![]);
        // [b, len, heads, d] -> q, v: [b, heads, len, d]; k: [b, heads, d, len]
        let q = self.node(
            "Transpose",
            &[&q],
            &format!("{l}.q.t"),
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let k = self.node(
            "Transpose",
            &[&k],
            &format!("{l}.k.t"),
            vec![attr_ints("perm", &[0, 2, 3, 1])],
        );
        let v = self.node(
            "Transpose",
            &[&v],
            &format!("{l}.v.t"),
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let scores = self.node("MatMul", &[&q, &k], &format!("{l}.scores"), vec![]);
        let scores = self.node(
            "Add",
            &[&scores, "mask_bias"],
            &format!("{l}.scores.masked"),
            vec![],
        );
        let probs = self.node(
            "Softmax",
            &[&scores],
            &format!("{l}.probs"),
            vec![attr_int("axis", -1)],
        );
        let ctx = self.node("MatMul", &[&probs, &v], &format!("{l}.ctx"), vec![]);
        let ctx = self.node(
            "Transpose",
            &[&ctx],
            &format!("{l}.ctx.t"),
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let ctx = self.node(
            "Reshape",
            &[&ctx, merge],
            &format!("{l}.ctx.merged"),
            vec![],
        );
        Ok(ctx)
    }

    /// Self-attention as ONNX Runtime's fused `com.microsoft.Attention`: one
    /// `[h, 3h]` projection for query, key and value, scaled dot products,
    /// softmax over the real tokens (`lengths`) and the weighted sum, in one
    /// kernel. Returns the context `[b, len, h]`.
    fn fused_attention(&mut self, x: &str, n: &str, l: &str) -> Result<String, GraphError> {
        let h = self.config.hidden_size;
        let mut weights = Vec::new();
        let mut biases = Vec::new();
        for part in ["query", "key", "value"] {
            let name = format!("{n}.attention.self.{part}");
            let w = self.weight(&format!("{name}.weight"), &[h, h])?;
            let b = self.weight(&format!("{name}.bias"), &[h])?;
            let w = self.init_f32(&format!("{name}.weight"), &[h, h], w);
            let b = self.init_f32(&format!("{name}.bias"), &[h], b);
            weights.push(self.node(
                "Transpose",
                &[&w],
                &format!("{name}.weight.t"),
                vec![attr_ints("perm", &[1, 0])],
            ));
            biases.push(b);
        }
        let w = self.node(
            "Concat",
            &[&weights[0], &weights[1], &weights[2]],
            &format!("{l}.qkv.weight"),
            vec![attr_int("axis", 1)],
        );
        let b = self.node(
            "Concat",
            &[&biases[0], &biases[1], &biases[2]],
            &format!("{l}.qkv.bias"),
            vec![attr_int("axis", 0)],
        );
        let heads = self.config.num_attention_heads as i64;
        let out = format!("{l}.ctx");
        self.nodes.push(NodeProto {
            input: vec![x.to_owned(), w, b, "lengths".to_owned()],
            output: vec![out.clone()],
            name: out.clone(),
            op_type: "Attention".to_owned(),
            attribute: vec![attr_int("num_heads", heads)],
            domain: MS_DOMAIN.to_owned(),
        });
        Ok(out)
    }

    fn build(mut self) -> Result<GraphProto, GraphError> {
        let c = self.config.clone();
        let (h, heads) = (c.hidden_size, c.num_attention_heads);
        let head_dim = h / heads;

        // Embeddings: word + position + token type 0 (folded into the positions).
        let (vocab, words) = self.table("embeddings.word_embeddings.weight", h)?;
        let positions = self.weight(
            "embeddings.position_embeddings.weight",
            &[c.max_position_embeddings, h],
        )?;
        let (_, types) = self.table("embeddings.token_type_embeddings.weight", h)?;
        // Token type 0 is added to every position's row once, at load.
        let h_bytes = 4 * h;
        let pos_type: Vec<u8> = positions
            .chunks_exact(h_bytes)
            .flat_map(|row| {
                row.chunks_exact(4)
                    .zip(types[..h_bytes].chunks_exact(4))
                    .flat_map(|(p, t)| (le_f32(p) + le_f32(t)).to_le_bytes())
            })
            .collect();
        let words = self.init_f32("word_embeddings", &[vocab, h], words);
        let pos_type = self.init_f32(
            "position_embeddings",
            &[c.max_position_embeddings, h],
            &pos_type,
        );
        let w = self.node(
            "Gather",
            &[&words, "input_ids"],
            "emb.words",
            vec![attr_int("axis", 0)],
        );
        let p = self.node(
            "Gather",
            &[&pos_type, "positions"],
            "emb.positions",
            vec![attr_int("axis", 0)],
        );
        let sum = self.node("Add", &[&w, &p], "emb.sum", vec![]);
        let mut x = self.layer_norm(&sum, "embeddings.LayerNorm", "emb.out")?;

        let split = self.init_i64("shape.heads", &[0, 0, heads as i64, head_dim as i64]);
        let merge = self.init_i64("shape.merged", &[0, 0, h as i64]);
        let scale = self.init_f32(
            "attention.scale",
            &[],
            &(1.0 / (head_dim as f32).sqrt()).to_le_bytes(),
        );
        for layer in 0..c.num_hidden_layers {
            let n = format!("encoder.layer.{layer}");
            let l = format!("l{layer}");
            let ctx = if self.fused {
                self.fused_attention(&x, &n, &l)?
            } else {
                self.attention(&x, &n, &l, &split, &merge, &scale)?
            };
            let attn = self.linear(
                &ctx,
                &format!("{n}.attention.output.dense"),
                h,
                h,
                None,
                &format!("{l}.attn"),
            )?;
            let res = self.node("Add", &[&attn, &x], &format!("{l}.attn.res"), vec![]);
            x = self.layer_norm(
                &res,
                &format!("{n}.attention.output.LayerNorm"),
                &format!("{l}.attn.out"),
            )?;
            // Feed-forward.
            let up = self.linear(
                &x,
                &format!("{n}.intermediate.dense"),
                h,
                c.intermediate_size,
                None,
                &format!("{l}.up"),
            )?;
            let act = self.node(
                "Gelu",
                &[&up],
                &format!("{l}.gelu"),
                vec![attr_string("approximate", "none")],
            );
            let down = self.linear(
                &act,
                &format!("{n}.output.dense"),
                c.intermediate_size,
                h,
                None,
                &format!("{l}.down"),
            )?;
            let res = self.node("Add", &[&down, &x], &format!("{l}.ffn.res"), vec![]);
            x = self.layer_norm(&res, &format!("{n}.output.LayerNorm"), &format!("{l}.out"))?;
        }
        self.node("Identity", &[&x], "hidden", vec![]);
        let fused = self.fused;

        Ok(GraphProto {
            node: self.nodes,
            name: "bert".to_owned(),
            initializer: self.initializers,
            input: vec![
                value_info(
                    "input_ids",
                    proto::INT64,
                    &[dim_param("batch"), dim_param("len")],
                ),
                value_info("positions", proto::INT64, &[dim_param("len")]),
                if fused {
                    value_info("lengths", proto::INT32, &[dim_param("batch")])
                } else {
                    value_info(
                        "mask_bias",
                        proto::FLOAT,
                        &[
                            dim_param("batch"),
                            dim_value(1),
                            dim_value(1),
                            dim_param("len"),
                        ],
                    )
                },
            ],
            output: vec![value_info(
                "hidden",
                proto::FLOAT,
                &[dim_param("batch"), dim_param("len"), dim_value(h as i64)],
            )],
        })
    }
}

#[cfg(test)]
mod tests;
