use super::*;

fn tiny_config() -> BertConfig {
    BertConfig {
        hidden_size: 4,
        num_hidden_layers: 1,
        num_attention_heads: 2,
        intermediate_size: 8,
        max_position_embeddings: 6,
        hidden_act: "gelu".to_owned(),
        layer_norm_eps: 1e-12,
    }
}

#[test]
fn non_safetensors_bytes_are_a_format_error() {
    let err = bert_model(&tiny_config(), b"not safetensors", Attention::Fused).unwrap_err();
    assert!(matches!(err, GraphError::Format(_)), "{err}");
}

#[test]
fn heads_must_divide_the_hidden_size() {
    let mut config = tiny_config();
    config.num_attention_heads = 3;
    let empty = safetensors::serialize(
        Vec::<(&str, safetensors::tensor::TensorView<'_>)>::new(),
        None,
    )
    .unwrap();
    let tensors = SafeTensors::deserialize(&empty).unwrap();
    let err = Builder::new(&config, &tensors).err().unwrap();
    assert!(err.to_string().contains("not a multiple"), "{err}");
}

#[test]
fn a_missing_tensor_is_named() {
    let empty = safetensors::serialize(
        Vec::<(&str, safetensors::tensor::TensorView<'_>)>::new(),
        None,
    )
    .unwrap();
    let err = bert_model(&tiny_config(), &empty, Attention::Standard).unwrap_err();
    assert!(
        err.to_string()
            .contains("embeddings.word_embeddings.weight"),
        "{err}"
    );
}
