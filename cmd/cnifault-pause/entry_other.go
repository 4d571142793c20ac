//go:build !amd64

package main

// entryNote: on this architecture the binary has no early entry point, and
// a SIGTERM in the first millisecond of its start-up, before the Go
// runtime's handlers, is lost (entry_amd64.s).
func entryNote() (string, bool) {
	return "SIGTERM handled once the Go runtime starts (no early entry point on this architecture)", true
}
