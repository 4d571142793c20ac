package cni_test

import (
	"context"
	"time"

	. "github.com/onsi/gomega"

	scn "github.com/cnifault/cnifault/fixtures/scenario"
)

// pollRounds runs round on each of w's rounds until it reports done, or
// until the window is over (scn.Rounds.Over: its span passed and at least
// its minimum rounds ran); a round in flight when the span ends finishes
// first. bound bounds the whole poll (w.Bound of the longest a round may
// take). It reports whether a round reported done; a round may end the
// poll at once with StopTrying.
func pollRounds(ctx context.Context, w scn.Rounds, bound time.Duration, round func() bool) bool {
	start, rounds, done := time.Now(), 0, false
	quiet := NewGomega(func(string, ...int) {})
	quiet.Eventually(func() bool {
		rounds++
		done = round()
		return done || w.Over(rounds, time.Since(start))
	}).WithContext(ctx).WithTimeout(bound).WithPolling(w.Interval).Should(BeTrue())
	return done
}
