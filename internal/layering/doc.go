// Package layering holds the test that keeps the project's packages
// importing in one direction, in the spirit of Kubernetes'
// .import-restrictions for its e2e framework:
//
//	suites → cli (the command line, on top) → runtimes, report, bisect
//	suites → runtimes → adapters (containerd, crio) → daemon
//	                                  → host, cri, image (the leaves)
//	suites → inspect (→ host, cri), report, cniconf
//	suites → verdict → inspect, report, cniconf
//	suites → scenario → runtimes, inspect, host, verdict, report, cniconf
//	cmd/cni-fault → cniconf only
//
// No engine package imports the CLI (fixtures/cli): the command line
// stands on the engine, never the engine on it.
//
// The adapters know nothing of inventories, reports or CNI configs: what
// they share is fixtures/daemon's, and only runtimes knows them both.
//
// Nothing imports suites, and Ginkgo and Gomega stay in suites: everything
// else is an ordinary package with plain Go tests.
package layering
