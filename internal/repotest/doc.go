// Package repotest tests the repository as a whole rather than one package:
// every Go snippet of README.md and docs/*.md compiles (readme_test.go), and
// a module outside the repository can depend on the nested modules at their
// planned versions (publish_test.go). It has no code of its own.
package repotest
