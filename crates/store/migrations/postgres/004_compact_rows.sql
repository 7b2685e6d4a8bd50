-- Schema version 4: compact rows, as in SQLite's migration 4.
--
-- 1. Request ids are `uuid` (16 bytes; the id's 128 bits, so they sort by
--    start time) instead of text. `WHERE request_id = '01a2…'` still works:
--    PostgreSQL casts the literal.
-- 2. `path`, `receipt` and `explanation` hold packed JSON: when that is
--    smaller, LZ4 (the byte 0x04, the JSON's length as u32 little-endian, one
--    LZ4 block), else the JSON text's UTF-8 bytes (which existing rows become).
--    These values are under TOAST's 2 KB threshold, so PostgreSQL would not
--    have compressed them itself.
ALTER TABLE requests
    ALTER COLUMN request_id TYPE uuid USING request_id::uuid,
    ALTER COLUMN path TYPE BYTEA USING convert_to(path, 'UTF8'),
    ALTER COLUMN receipt TYPE BYTEA USING convert_to(receipt, 'UTF8'),
    ALTER COLUMN explanation TYPE BYTEA USING convert_to(explanation, 'UTF8');
ALTER TABLE spans
    ALTER COLUMN request_id TYPE uuid USING request_id::uuid;
