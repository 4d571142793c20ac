package deps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Use is a place in the sources that executes a program by name.
type Use struct {
	Program string
	Pos     string // file:line, relative to the scanned root
}

// helpers are the project's functions that take a program's name and
// execute it or look it up, by package dir and function: the argument index
// of the name. A literal passed there is a program as much as one passed to
// exec.Command.
var helpers = map[string]map[string]int{
	"fixtures/inspect": {"tool": 0, "requireTool": 1, "run": 0, "iptablesSave": 1},
	// CheckBinary runs `<path> --version`.
	"fixtures/kubelet": {"CheckBinary": 0},
}

// wrappers run the program named after "--" in their arguments.
var wrappers = map[string]bool{"unshare": true, "nsenter": true, "setsid": true, "chroot": true, "timeout": true}

// binPath is a literal absolute path of an executable in a bin dir: a
// runtime binary, a helper given to a config, a tool a test requires.
var binPath = regexp.MustCompile(`^(/usr)?(/local)?/s?bin/[A-Za-z0-9._+-]+$`)

// shellBuiltins never name a program at a command's start.
var shellBuiltins = map[string]bool{"exec": true, "exit": true, "wait": true, "echo": true, "cd": true,
	"set": true, "export": true, "trap": true, "read": true, "test": true, "[": true, ":": true, "!": true,
	"if": true, "then": true, "else": true, "fi": true, "for": true, "while": true, "do": true, "done": true,
	"case": true, "esac": true, "kill": true, "printf": true}

// Scan finds the programs the Go files under root execute by a literal
// name: the program of exec.Command, exec.CommandContext, exec.LookPath and
// syscall.Exec (a literal, or the last element of a filepath.Join), the
// names given to the helpers above, the programs of a literal `sh -c`
// script and of unshare-like wrappers, and literal paths in bin dirs.
// Directories named testdata, vendor, _output or starting with a dot are
// skipped below root.
func Scan(root string) ([]Use, error) {
	var uses []Use
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "testdata" || n == "vendor" || n == "_output" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		dir := filepath.ToSlash(filepath.Dir(rel))
		add := func(name string, at token.Pos) {
			if name = programName(name); name != "" {
				pos := fset.Position(at)
				uses = append(uses, Use{Program: name, Pos: filepath.ToSlash(rel) + ":" + strconv.Itoa(pos.Line)})
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, ok := literal(n); ok && binPath.MatchString(s) {
					add(s, n.Pos())
				}
			case *ast.CallExpr:
				scanCall(n, dir, add)
			}
			return true
		})
		return nil
	})
	return uses, err
}

func scanCall(call *ast.CallExpr, dir string, add func(string, token.Pos)) {
	arg := -1
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		pkg, ok := fn.X.(*ast.Ident)
		if !ok {
			return
		}
		switch pkg.Name + "." + fn.Sel.Name {
		case "exec.Command", "exec.LookPath", "syscall.Exec", "unix.Exec":
			arg = 0
		case "exec.CommandContext":
			arg = 1
		}
	case *ast.Ident:
		if i, ok := helpers[dir][fn.Name]; ok {
			arg = i
		}
	}
	if arg < 0 || arg >= len(call.Args) {
		return
	}
	prog, ok := programArg(call.Args[arg])
	if !ok {
		return
	}
	add(prog, call.Args[arg].Pos())
	rest := call.Args[arg+1:]
	switch name := programName(prog); {
	case (name == "sh" || name == "bash") && len(rest) >= 2 && isLiteral(rest[0], "-c"):
		if script, ok := leadingLiteral(rest[1]); ok {
			for _, p := range scriptPrograms(script) {
				add(p, rest[1].Pos())
			}
		}
	case wrappers[name]:
		for i, a := range rest {
			if isLiteral(a, "--") && i+1 < len(rest) {
				if p, ok := programArg(rest[i+1]); ok {
					add(p, rest[i+1].Pos())
				}
				break
			}
		}
	}
}

// programArg is a program given as a literal or as filepath.Join(..., "name").
func programArg(e ast.Expr) (string, bool) {
	if s, ok := literal(e); ok {
		return s, true
	}
	if c, ok := e.(*ast.CallExpr); ok && len(c.Args) > 0 {
		if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Join" {
			if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "filepath" || pkg.Name == "path") {
				return literal(c.Args[len(c.Args)-1])
			}
		}
	}
	return "", false
}

// programName is the basename of a program path; "" for what names no
// program (an empty string or shell parameter).
func programName(s string) string {
	s = path.Base(strings.TrimSpace(s))
	if s == "" || s == "." || s == "/" || strings.ContainsAny(s, `$"' `) {
		return ""
	}
	return s
}

var commandSep = regexp.MustCompile(`&&|\|\||[;|&\n()]`)

// scriptPrograms are the programs at the start of a shell script's commands.
func scriptPrograms(script string) []string {
	var out []string
	for _, cmd := range commandSep.Split(script, -1) {
		for _, w := range strings.Fields(cmd) {
			if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") {
				continue // an assignment before the command
			}
			if w == "exec" || w == "!" {
				continue
			}
			if !shellBuiltins[w] && programName(w) != "" {
				out = append(out, w)
			}
			break
		}
	}
	return out
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func isLiteral(e ast.Expr, want string) bool {
	s, ok := literal(e)
	return ok && s == want
}

// leadingLiteral is the literal start of a string concatenation.
func leadingLiteral(e ast.Expr) (string, bool) {
	for {
		b, ok := e.(*ast.BinaryExpr)
		if !ok || b.Op != token.ADD {
			return literal(e)
		}
		e = b.X
	}
}
