package main

// startedAtEntry is set by rt0 when the binary was linked to start there.
var startedAtEntry bool

func rt0()
func exitAtEntry()

// entryNote says how the binary handles a stop signal before the Go
// runtime's handlers are installed, or what it lacks.
func entryNote() (string, bool) {
	if !startedAtEntry {
		return "built without -ldflags=-E=main.rt0, so a SIGTERM sent before its Go runtime starts is lost; build it with make build", false
	}
	return "SIGTERM and SIGINT handled from the entry point", true
}
