// Package cniconf builds CNI network configuration lists as typed values and
// writes them into a runtime's CNI config directory.
//
// Specs describe networks and faults as data so that a scenario's conflist is
// reviewable Go rather than an ad-hoc JSON string, and so that the exact bytes
// the runtime loaded can be attached to a failure report. This package is
// deliberately free of Ginkgo: fixtures and tools use it too.
package cniconf
