// Command leasesbench measures libleases against the SQLite floor. `run` is
// the driver behind `make bench`: it runs every row (this binary's own
// subcommands, the C program, the CLI, the peers and the bindings) as child
// processes, interleaving the repetitions, and prints one table. The other
// subcommands are the rows; each prints one JSON result line on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"
)

// result is what every row process prints (the C program, the peers and the
// bindings print the same fields).
type result struct {
	Ops   int                `json:"ops"`           // cycles (or claims, or calls) measured
	Secs  float64            `json:"secs"`          // wall time of the measured loop
	P50NS int64              `json:"p50_ns"`        // claim latency percentiles, where measured
	P99NS int64              `json:"p99_ns"`        //
	Busy  int                `json:"busy"`          // writer-lock timeouts seen (contention)
	NSOp  float64            `json:"ns_op"`         // boundary rows: ns per call
	CPUNS float64            `json:"cpu_ns"`        // process CPU (user+sys) per op in the timed loop
	Lat   []int64            `json:"lat,omitempty"` // raw claim latencies (contention workers)
	Extra map[string]float64 `json:"extra,omitempty"`
}

func (r result) rate() float64 {
	if r.Secs <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Secs
}

func emit(r result) {
	b, err := json.Marshal(r)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "leasesbench:", err)
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fail(err)
	}
}

// percentile of sorted-in-place latencies (nearest rank).
func percentile(lat []int64, p float64) int64 {
	if len(lat) == 0 {
		return 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	i := int(p*float64(len(lat))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(lat) {
		i = len(lat) - 1
	}
	return lat[i]
}

// cpuNS is this process's CPU time (user+sys) so far.
func cpuNS() int64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func since(t time.Time) int64 { return time.Since(t).Nanoseconds() }

var commands = map[string]func(args []string){
	"run":            cmdRun,
	"floor":          cmdFloor,
	"core":           cmdCore,
	"frames":         cmdFrames,
	"inline":         cmdInline,
	"next":           cmdNext,
	"edit":           cmdEdit,
	"scale-fill":     cmdScaleFill,
	"scale-claim":    cmdScaleClaim,
	"contend-worker": cmdContendWorker,
	"workers":        cmdWorkers,
	"fill":           cmdFill,
	"rss":            cmdRSS,
	"wake":           cmdWake,
	"wake-waiter":    cmdWakeWaiter,
	"idle":           cmdIdle,
	"workloop":       cmdWorkloop,
	"pgloop":         cmdPGLoop,
	"page":           cmdPage,
	"webpage":        cmdWebPage,
	"steady":         cmdSteady,
	"faceloop":       cmdFaceLoop,
	"facecheck":      cmdFaceCheck,
}

func main() {
	// LEASESBENCH_CPUPROFILE=FILE profiles any row (docs/PERFORMANCE.md).
	if f := os.Getenv("LEASESBENCH_CPUPROFILE"); f != "" && len(os.Args) > 1 && os.Args[1] != "run" {
		out, err := os.Create(f)
		must(err)
		must(pprof.StartCPUProfile(out))
		defer pprof.StopCPUProfile()
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: leasesbench run|floor|core|inline|next|edit|scale-fill|scale-claim|contend-worker|workers|fill|rss|wake|wake-waiter|idle|workloop|pgloop|page|webpage|steady|faceloop|facecheck [flags]")
		os.Exit(2)
	}
	commands[os.Args[1]](os.Args[2:])
}
