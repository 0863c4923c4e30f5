.PHONY: test bench lint report

test: ## the whole suite, real Redis included (installs redis-server if missing)
	./scripts/test.sh

bench: ## Go benchmarks of the library and of benchmarks/ (strategies, peers)
	go test -run '^$$' -bench . -benchmem ./...
	go -C benchmarks test -run '^$$' -bench . -benchmem ./...

report: ## the strategy comparison report on an embedded miniredis
	go -C benchmarks run ./cmd/report

lint:
	test -z "$$(gofmt -l .)"
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@latest ./...
