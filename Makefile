.PHONY: test bench lint report

# staticcheck, pinned (honnef.co/go/tools); scripts/test.sh pins the same
STATICCHECK_VERSION := v0.8.2
# every module of the repository: the root and each nested go.mod
MODULES = $(shell git ls-files --cached --others --exclude-standard 'go.mod' '*/go.mod' | xargs -n1 dirname)

test: ## the whole suite, real Redis included (installs redis-server if missing)
	./scripts/test.sh

bench: ## Go benchmarks of the library and of benchmarks/ (strategies, peers)
	go test -run '^$$' -bench . -benchmem ./...
	go -C benchmarks test -run '^$$' -bench . -benchmem ./...

lint: ## gofmt, go vet and staticcheck on every module
	test -z "$$(gofmt -l .)"
	set -e; for d in $(MODULES); do echo "lint: ./$$d"; (cd $$d && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...); done

# the full comparison at the current commit (the report prints it), on a
# redis-server the report starts; about 3 minutes: run it on a quiet machine
REPORT_FLAGS := -duration 150s -rounds 10 -concurrency 1,8,64,256 -local 1s -chart chart.svg -goals
report: ## regenerate benchmarks/report.txt and benchmarks/chart.svg
	{ echo "# make report: go -C benchmarks run ./cmd/report $(REPORT_FLAGS)"; go -C benchmarks run ./cmd/report -q $(REPORT_FLAGS); } > benchmarks/report.txt.new
	mv benchmarks/report.txt.new benchmarks/report.txt
