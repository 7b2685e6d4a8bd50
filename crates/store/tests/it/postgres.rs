//! The shared suite against a throwaway PostgreSQL server.

crate::suite::store_suite!(crate::fixture::postgres);

/// A database written at schema 3 (text ids, JSON text) migrates to schema
/// 4 with every request readable.
#[test]
fn migrates_schema_3_rows() {
    use glassbox_store::synth::{SynthRequest, build};
    use glassbox_store::{PostgresStore, TraceStore};

    let pg = crate::fixture::pg_server();
    let url = pg.create_database("migrate3").unwrap();
    let mut reqs = Vec::new();
    {
        let mut store = PostgresStore::connect(&url).unwrap();
        for i in 0..3u64 {
            let mut r = SynthRequest::new(20 + i, crate::suite::T0 + i);
            r.failed = i == 2;
            crate::suite::put(&mut store, &r);
            reqs.push(r);
        }
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for r in &reqs {
        let (record, _) = build(r);
        client
            .execute(
                "UPDATE requests SET path = convert_to($2, 'UTF8'), receipt = convert_to($3, 'UTF8'),
                     explanation = convert_to($4, 'UTF8') WHERE request_id = $1",
                &[
                    &uuid::Uuid::from_u128(record.request_id.0),
                    &serde_json::to_string(&record.path).unwrap(),
                    &serde_json::to_string(&record.receipt).unwrap(),
                    &serde_json::to_string(&record.explanation).unwrap(),
                ],
            )
            .unwrap();
    }
    client
        .batch_execute(
            "ALTER TABLE requests
                 ALTER COLUMN request_id TYPE text USING request_id::text,
                 ALTER COLUMN path TYPE text USING convert_from(path, 'UTF8'),
                 ALTER COLUMN receipt TYPE text USING convert_from(receipt, 'UTF8'),
                 ALTER COLUMN explanation TYPE text USING convert_from(explanation, 'UTF8');
             ALTER TABLE spans ALTER COLUMN request_id TYPE text USING request_id::text;
             DROP INDEX requests_report;
             ALTER TABLE requests DROP COLUMN input_len, DROP COLUMN input_tokens;
             ALTER TABLE spans DROP COLUMN critical_us, DROP COLUMN req_input_len;
             CREATE INDEX requests_report ON requests (topology_id, started_at_us, version,
                 model_key, duration_us, status, degraded, timeouts, cost_f, path_key, top_node,
                 input_chars);
             DELETE FROM schema_version WHERE version >= 4;",
        )
        .unwrap();
    let mut store = PostgresStore::connect(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), 5);
    crate::suite::assert_stored_before_5(&mut store, &reqs);
    let ty: String = client
        .query_one(
            "SELECT data_type FROM information_schema.columns
              WHERE table_name = 'spans' AND column_name = 'request_id'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ty, "uuid");
}
