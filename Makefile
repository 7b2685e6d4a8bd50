# One entry point for the tasks people run. `make ci` is exactly what CI runs.
.PHONY: ci test demo fmt lint schema bench-validate

ci test:
	./scripts/test.sh

demo:
	./scripts/demo.sh

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --all-targets -- -D warnings

schema:
	cargo run -q -p glassbox-cli -- schema > docs/topology.schema.json

bench-validate:
	cargo run --release -q -p glassbox-topology --example bench_validate
