// The binding rows: Python (bench/python), C++ (bench/cpp) and Rust
// (bench/rust). Each is probed once; a binding that is not usable yet gets a
// row saying so instead of a figure.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

type binding struct {
	name  string
	argv  func(o *opts) []string // the row program; mode and args follow
	env   func(o *opts) []string
	probe func(o *opts) string // "" when usable, else why not
}

func bindingList() []binding {
	return []binding{
		{
			name: "Python",
			argv: func(o *opts) []string {
				return []string{o.python, filepath.Join(o.repo, "bench/python/pybench.py")}
			},
			env: func(o *opts) []string {
				return []string{"PYTHONPATH=" + filepath.Join(o.repo, "bindings/python"),
					"LEASES_LIBRARY=" + filepath.Join(o.repo, "build/libleases.so")}
			},
			probe: func(o *opts) string {
				cmd := exec.Command(o.python, filepath.Join(o.repo, "bench/python/pybench.py"), "probe")
				cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(o.repo, "bindings/python"),
					"LEASES_LIBRARY="+filepath.Join(o.repo, "build/libleases.so"))
				if out, err := cmd.CombinedOutput(); err != nil {
					return "binding not yet landed: " + lastLine(string(out))
				}
				return ""
			},
		},
		{
			name: "C++",
			argv: func(o *opts) []string { return []string{o.exe("cppbench")} },
			env:  func(o *opts) []string { return nil },
			probe: func(o *opts) string {
				if !exists(o.exe("cppbench")) {
					return "binding not yet landed (build/bench/cppbench not built: bindings/cpp header missing or failed to compile)"
				}
				return ""
			},
		},
		{
			name: "Rust",
			argv: func(o *opts) []string { return []string{o.exe("rustbench")} },
			env:  func(o *opts) []string { return nil },
			probe: func(o *opts) string {
				if !exists(o.exe("rustbench")) {
					return "binding not yet landed (build/bench/rustbench not built: the bindings/rust crate is not usable yet)"
				}
				return ""
			},
		},
	}
}

var probed = map[string]string{}

func probeOnce(o *opts, b binding) string {
	if why, ok := probed[b.name]; ok {
		return why
	}
	why := b.probe(o)
	probed[b.name] = strings.TrimSpace(why)
	return probed[b.name]
}

// bindingRows: the two-commit cycle through each binding (FULL: the ABI has
// no synchronous option).
func bindingRows(o *opts, n int) []*row {
	var rows []*row
	for _, b := range bindingList() {
		b := b
		r := &row{section: "cycle", name: b.name + " FULL", run: func(dir string) (result, error) {
			return child(append(b.argv(o), "cycle", filepath.Join(dir, "b.db"), itoa(n)), b.env(o)...)
		}}
		r.skip = probeOnce(o, b)
		rows = append(rows, r)
	}
	return rows
}

func bindingBoundaryRows(o *opts, calls int) []*row {
	var rows []*row
	for _, b := range bindingList() {
		b := b
		c := calls
		if b.name == "Python" {
			c = max(calls/20, 1000) // ctypes calls cost ~µs; fewer keep the row short
		}
		r := &row{section: "boundary", name: b.name, run: func(dir string) (result, error) {
			return child(append(b.argv(o), "boundary", filepath.Join(dir, "b.db"), itoa(c)), b.env(o)...)
		}}
		r.skip = probeOnce(o, b)
		rows = append(rows, r)
	}
	return rows
}
