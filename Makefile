.PHONY: test bench lint report

test: ## the whole suite, real Redis included (installs redis-server if missing)
	./scripts/test.sh

bench:
	go test -run '^$$' -bench . -benchmem ./...

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@latest ./...

report:
	go run ./examples/quickstart
