//! Small constructors of ONNX messages (attributes, dimensions, value
//! infos) for the graph builder.

use super::proto::{
    self, AttributeProto, DimValue, Dimension, TensorShapeProto, TensorTypeProto, TypeProto,
    ValueInfoProto,
};

pub(super) fn le_f32(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub(super) fn attr_int(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_owned(),
        i,
        r#type: proto::ATTR_INT,
        ..Default::default()
    }
}

pub(super) fn attr_float(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_owned(),
        f,
        r#type: proto::ATTR_FLOAT,
        ..Default::default()
    }
}

pub(super) fn attr_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_owned(),
        ints: ints.to_vec(),
        r#type: proto::ATTR_INTS,
        ..Default::default()
    }
}

pub(super) fn attr_string(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_owned(),
        s: s.as_bytes().to_vec(),
        r#type: proto::ATTR_STRING,
        ..Default::default()
    }
}

pub(super) fn dim_param(name: &str) -> Dimension {
    Dimension {
        value: Some(DimValue::Param(name.to_owned())),
    }
}

pub(super) fn dim_value(v: i64) -> Dimension {
    Dimension {
        value: Some(DimValue::Value(v)),
    }
}

pub(super) fn value_info(name: &str, elem_type: i32, dims: &[Dimension]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type,
                shape: Some(TensorShapeProto { dim: dims.to_vec() }),
            }),
        }),
    }
}
