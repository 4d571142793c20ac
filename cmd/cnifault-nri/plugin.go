package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/cnifault/cnifault/cniconf"
)

// plugin answers the runtime's NRI events: it journals each, and fails the
// ones a scenario's fault names for its pod.
type plugin struct {
	mu   sync.Mutex
	conf cniconf.NRIPluginConfig
	// counts are each (pod, event) pair's invocations so far. They live in
	// the process: a runtime restart launches a new plugin and they start
	// over, which a scenario that restarts the runtime clears its fault
	// before.
	counts map[string]int
}

// Configure reads the config the runtime passes from the plugin's conf
// file and subscribes to the events the plugin implements.
func (p *plugin) Configure(_ context.Context, config, runtime, version string) (api.EventMask, error) {
	var c cniconf.NRIPluginConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return 0, fmt.Errorf("cnifault-nri: config %q: %w", config, err)
	}
	if c.FaultDir == "" || c.Journal == "" {
		return 0, errors.New("cnifault-nri: config needs faultDir and journal")
	}
	p.mu.Lock()
	p.conf, p.counts = c, map[string]int{}
	p.mu.Unlock()
	if c.Log != "" {
		nrilog.Set(fileLogger{path: c.Log})
	}
	p.logf("registered with %s %s", runtime, version)
	return 0, nil
}

// Synchronize is the runtime's first call once the plugin is registered:
// its journal line tells the harness the plugin is in place.
func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	p.journal(cniconf.JournalEntry{Verb: cniconf.NRISynchronize, Action: cniconf.ActionPass, Step: -1, Invocation: -1})
	return nil, nil
}

// RunPodSandbox is called after the runtime started the sandbox and set up
// its network: a rejection here is a failure after a successful ADD.
func (p *plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.event(cniconf.NRIRunPodSandbox, pod, "")
}

// StopPodSandbox is called when the sandbox is stopped.
func (p *plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.event(cniconf.NRIStopPodSandbox, pod, "")
}

// RemovePodSandbox is called when the sandbox is removed.
func (p *plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	return p.event(cniconf.NRIRemovePodSandbox, pod, "")
}

// CreateContainer is called before a container of the pod is created; a
// rejection fails CreateContainer.
func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, p.event(cniconf.NRICreateContainer, pod, ctr.GetId())
}

// event journals one event and applies the step a fault gives it.
func (p *plugin) event(verb cniconf.Verb, pod *api.PodSandbox, containerID string) error {
	if containerID == "" {
		containerID = pod.GetId()
	}
	e := cniconf.JournalEntry{
		Verb: verb, ContainerID: containerID, PodUID: pod.GetUid(), Netns: netns(pod),
		Action: cniconf.ActionPass, Step: -1, Invocation: -1,
	}
	p.mu.Lock()
	conf := p.conf
	for _, f := range cniconf.ReadNRIFaults(conf.FaultDir) {
		if f.PodUID != e.PodUID {
			continue
		}
		key := e.PodUID + "/" + string(verb)
		e.Targeted, e.Invocation = true, p.counts[key]
		p.counts[key]++
		var step cniconf.Step
		e.Step, step = cniconf.Pick(f.Faults[verb], e.Invocation)
		e.Action = step.Action
		p.mu.Unlock()
		p.journal(e)
		return apply(verb, step)
	}
	p.mu.Unlock()
	p.journal(e)
	return nil
}

// apply does what a step says, as the answer to the runtime.
func apply(verb cniconf.Verb, s cniconf.Step) error {
	switch s.Action {
	case cniconf.ActionError:
		msg := s.Msg
		if msg == "" {
			msg = "cnifault-nri: injected " + string(verb) + " rejection"
		}
		return errors.New(msg)
	case cniconf.ActionDelay:
		d, err := time.ParseDuration(s.Delay)
		if err != nil {
			return fmt.Errorf("cnifault-nri: delay %q: %w", s.Delay, err)
		}
		time.Sleep(d)
	}
	return nil
}

// netns is the pod's network namespace path, for the journal.
func netns(pod *api.PodSandbox) string {
	for _, ns := range pod.GetLinux().GetNamespaces() {
		if ns.GetType() == "network" {
			return ns.GetPath()
		}
	}
	return ""
}

// journal appends e; a journal the plugin cannot write is logged, and the
// event is still answered: a missing line makes the scenario an error
// (fault not seen), never a wrong verdict.
func (p *plugin) journal(e cniconf.JournalEntry) {
	e.Time, e.PID = time.Now(), os.Getpid()
	p.mu.Lock()
	path := p.conf.Journal
	p.mu.Unlock()
	if err := cniconf.AppendJournal(path, e); err != nil {
		p.logf("journal: %v", err)
	}
}

// logf writes a line to the plugin's log, if it has one.
func (p *plugin) logf(format string, args ...any) {
	p.mu.Lock()
	path := p.conf.Log
	p.mu.Unlock()
	if path != "" {
		fileLogger{path: path}.write("plugin", format, args...)
	}
}

// fileLogger is the NRI library's logger: the runtime launches the plugin
// with no stdout or stderr, so its messages would otherwise be lost.
type fileLogger struct{ path string }

func (l fileLogger) write(level, format string, args ...any) {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s pid=%d %s\n", time.Now().Format(time.RFC3339Nano), level, os.Getpid(), fmt.Sprintf(format, args...))
}

func (l fileLogger) Debugf(_ context.Context, format string, args ...any) {
	l.write("debug", format, args...)
}
func (l fileLogger) Infof(_ context.Context, format string, args ...any) {
	l.write("info", format, args...)
}
func (l fileLogger) Warnf(_ context.Context, format string, args ...any) {
	l.write("warn", format, args...)
}
func (l fileLogger) Errorf(_ context.Context, format string, args ...any) {
	l.write("error", format, args...)
}
