// Package deps reads hack/programs.txt, the one list of the programs
// cnifault executes and where each comes from, and finds the programs the
// project's Go sources execute by name, so that a test can hold the two
// together: hack/deps.sh installs from the list, and a program the code
// starts but the list lacks would be missing on a fresh machine.
package deps

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Program is one row of hack/programs.txt.
type Program struct {
	// Name is the name the program is executed by; "-" for a package
	// needed for its files only.
	Name string
	// Source is apt:<package>, build:<what>[@<tag>], project or go.
	Source string
	// Needed lists the runs that need it: all, a runtime or family, test.
	Needed []string
	// RunBy lists who executes it: harness, tests, deps, or a runtime or
	// plugin.
	RunBy []string
	// Min is an apt: row's oldest package version, "" for any (and for
	// every other row).
	Min string
	// Line is the row's line number in the file.
	Line int
}

// RunByProject tells whether the project's Go code executes the program,
// so that its sources must name it.
func (p Program) RunByProject() bool {
	return slices.Contains(p.RunBy, "harness") || slices.Contains(p.RunBy, "tests")
}

// Load reads a program list.
func Load(path string) ([]Program, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ps, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}

var sourceKinds = []string{"apt:", "build:", "project", "go"}

// minRE is a min column's version: an optional epoch and an upstream
// version starting with a digit, as dpkg --compare-versions reads it.
var minRE = regexp.MustCompile(`^([0-9]+:)?[0-9][0-9A-Za-z.+~]*$`)

// Parse reads a program list: blank-separated columns program, source,
// needed, run-by, min; # starts a comment line.
func Parse(r io.Reader) ([]Program, error) {
	var out []Program
	// minOf is each package's min and the row that set it: hack/deps.sh
	// checks a package once, so its rows must agree.
	minOf := map[string]Program{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("line %d: want 5 columns (program source needed run-by min), got %d", n, len(f))
		}
		if !slices.ContainsFunc(sourceKinds, func(k string) bool {
			if strings.HasSuffix(k, ":") {
				return strings.HasPrefix(f[1], k) && len(f[1]) > len(k)
			}
			return f[1] == k
		}) {
			return nil, fmt.Errorf("line %d: source %q is none of apt:<package>, build:<what>, project, go", n, f[1])
		}
		p := Program{Name: f[0], Source: f[1], Needed: strings.Split(f[2], ","),
			RunBy: strings.Split(f[3], ","), Line: n}
		switch {
		case f[4] == "-":
		case !strings.HasPrefix(f[1], "apt:"):
			return nil, fmt.Errorf("line %d: min %q on a %s row: only a distribution package has one (want -)", n, f[4], f[1])
		case !minRE.MatchString(f[4]):
			return nil, fmt.Errorf("line %d: min %q is not a version ([epoch:]upstream, e.g. 1.8.9)", n, f[4])
		default:
			p.Min = f[4]
		}
		if first, ok := minOf[p.Source]; ok && strings.HasPrefix(p.Source, "apt:") && first.Min != p.Min {
			return nil, fmt.Errorf("line %d: %s's min %q differs from line %d's %q", n, p.Source, f[4], first.Line, first.Min)
		} else if !ok {
			minOf[p.Source] = p
		}
		out = append(out, p)
	}
	return out, sc.Err()
}
