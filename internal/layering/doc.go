// Package layering holds the test that keeps the project's packages
// importing in one direction, in the spirit of Kubernetes'
// .import-restrictions for its e2e framework:
//
//	suites → framework → runtimes → adapters (containerd, crio) → daemon
//	       → inspect, host, cri, report, image → cniconf
//	suites → verdict → inspect, report, cniconf
//	cmd/cni-fault → cniconf only
//
// Nothing imports suites, and Ginkgo and Gomega stay in suites: everything
// else is an ordinary package with plain Go tests.
package layering
