// Package hack holds the project's scripts and tables. Its Go side is the
// expectations file, hack/known-failures.yaml, embedded: a cnifault binary
// carries the expectations it was built with, so that a run without
// --known-failures (on a node far from this repository) still points each
// failure with a known upstream cause at its reason and link.
package hack

import _ "embed"

// KnownFailures is hack/known-failures.yaml as this build shipped it.
//
//go:embed known-failures.yaml
var KnownFailures []byte

// KnownFailuresFile names it in messages.
const KnownFailuresFile = "hack/known-failures.yaml"
