//! Unit tests of the cache's storage: keys, TTL, the LRU bound, similarity.

use std::time::Duration;

use glassbox_topology::{CachePolicy, NodeId, Similarity};
use serde_json::json;

use super::*;

fn cache(ttl_s: u64, max_entries: usize, threshold: Option<f64>) -> NodeCache {
    NodeCache {
        policy: CachePolicy {
            ttl: Duration::from_secs(ttl_s),
            max_entries,
            similarity: threshold.map(|threshold| Similarity {
                embedding: NodeId(0),
                threshold,
                text: None,
            }),
        },
        identity: [7; 32],
        ancestors: Vec::new(),
        entries: Mutex::new(LruCache::new(max_entries)),
    }
}

fn key(n: u8) -> Key {
    [n; 32]
}

fn answer(text: &str) -> Arc<NodeOutput> {
    Arc::new(NodeOutput::new(json!({ "text": text })).tokens(10, 20))
}

fn miss(n: u8, vector: Option<&[f32]>) -> Miss {
    Miss {
        key: key(n),
        vector: vector.map(Arc::from),
    }
}

fn hit(p: Probe) -> Option<Hit> {
    match p {
        Probe::Hit(h) => Some(h),
        Probe::Miss(_) => None,
    }
}

#[test]
fn an_exact_key_hits_and_another_misses() {
    let c = cache(60, 10, None);
    assert!(hit(c.exact(key(1))).is_none(), "empty cache");
    c.store(&miss(1, None), answer("four"));
    let h = hit(c.exact(key(1))).expect("stored answer");
    assert_eq!(h.matched, Match::Exact);
    assert_eq!(h.output.value["text"], "four");
    assert!(hit(c.exact(key(2))).is_none());
}

#[tokio::test(start_paused = true)]
async fn entries_expire_after_the_ttl() {
    let c = cache(60, 10, None);
    c.store(&miss(1, None), answer("four"));
    tokio::time::advance(Duration::from_secs(59)).await;
    let h = hit(c.exact(key(1))).expect("fresh for 59 s");
    assert_eq!(h.age, Duration::from_secs(59));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(hit(c.exact(key(1))).is_none(), "expired at 60 s");
    assert_eq!(c.len(), 0, "an expired entry is dropped when met");
}

#[test]
fn the_least_recently_used_entry_goes_first() {
    let c = cache(60, 2, None);
    c.store(&miss(1, None), answer("one"));
    c.store(&miss(2, None), answer("two"));
    assert!(
        hit(c.exact(key(1))).is_some(),
        "1 is now the most recently used"
    );
    c.store(&miss(3, None), answer("three"));
    assert_eq!(c.len(), 2);
    assert!(hit(c.exact(key(2))).is_none(), "2 was least recently used");
    assert!(hit(c.exact(key(1))).is_some());
    assert!(hit(c.exact(key(3))).is_some());
}

#[test]
fn similarity_hits_only_at_or_above_the_threshold() {
    let stored: &[f32] = &[1.0, 0.0, 0.0];
    let near: Arc<[f32]> = Arc::from(&[0.96f32, 0.28, 0.0][..]); // cosine 0.96
    let far: Arc<[f32]> = Arc::from(&[0.6f32, 0.8, 0.0][..]); // cosine 0.6
    let c = cache(60, 10, Some(0.95));
    c.store(&miss(1, Some(stored)), answer("four"));
    let h = hit(c.similar(key(9), near.clone())).expect("0.96 >= 0.95");
    assert!(matches!(h.matched, Match::Similar(s) if (s - 0.96).abs() < 1e-6));
    assert_eq!(h.key, key(1), "the hit names the entry it came from");
    assert!(hit(c.similar(key(9), far)).is_none(), "0.6 < 0.95");
    let strict = cache(60, 10, Some(0.99));
    strict.store(&miss(1, Some(stored)), answer("four"));
    assert!(hit(strict.similar(key(9), near)).is_none(), "0.96 < 0.99");
}

#[test]
fn the_most_similar_entry_wins() {
    let c = cache(60, 10, Some(0.5));
    c.store(&miss(1, Some(&[0.6, 0.8])), answer("far"));
    c.store(&miss(2, Some(&[1.0, 0.1])), answer("near"));
    let h = hit(c.similar(key(9), Arc::from(&[1.0f32, 0.0][..]))).unwrap();
    assert_eq!(h.output.value["text"], "near");
}

#[test]
fn a_refresh_keeps_the_stored_embedding() {
    let c = cache(60, 10, Some(0.9));
    c.store(&miss(1, Some(&[1.0, 0.0])), answer("bad"));
    c.store(&miss(1, None), answer("good"));
    let h = hit(c.similar(key(9), Arc::from(&[1.0f32, 0.0][..]))).unwrap();
    assert_eq!(h.output.value["text"], "good");
}

#[test]
fn a_hit_output_says_so_and_uses_no_tokens() {
    let h = Hit {
        output: answer("four"),
        matched: Match::Similar(0.97312),
        age: Duration::from_millis(1500),
        key: key(0xab),
    };
    let out = h.output();
    assert_eq!(out.value["text"], "four");
    assert_eq!(out.tokens, Default::default());
    assert_eq!(out.tags.get(TAG).map(String::as_str), Some(HIT));
    assert_eq!(out.tags["cache_similarity"], "0.973");
    assert_eq!(out.tags["cache_key"], "abababababababab");
    assert_eq!(
        out.facts[0],
        Fact::Cached {
            matched: "similar".into(),
            similarity: Some(0.973),
            age_ms: 1500,
        }
    );
}

#[test]
fn json_keys_hash_in_any_order() {
    let hash = |v: &Value| {
        let mut h = Sha256::new();
        write_value(&mut h, v);
        digest(h)
    };
    let a = json!({"question": "price?", "user": {"id": 1, "plan": "pro"}});
    let b: Value =
        serde_json::from_str(r#"{"user": {"plan": "pro", "id": 1}, "question": "price?"}"#)
            .unwrap();
    assert_eq!(hash(&a), hash(&b));
    assert_ne!(hash(&a), hash(&json!({"question": "price!"})));
    // Lengths come first, so contents cannot run into each other.
    assert_ne!(hash(&json!(["ab", "c"])), hash(&json!(["a", "bc"])));
}

#[test]
fn cosine_of_degenerate_vectors_is_zero() {
    assert_eq!(cosine(&[], &[]), 0.0);
    assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    assert!((cosine(&[2.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-12);
}
