// The Go runtime and process series, with the HELP and TYPE lines the
// VictoriaMetrics library leaves out of them.

package engine

import (
	"bytes"
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// runtimeFamily is a runtime or process family's TYPE and HELP.
type runtimeFamily struct{ typ, help string }

// runtimeRenames are the library's names that break the Prometheus naming
// rules promtool checks (a _count suffix outside a histogram or summary, a
// counter without _total), and what Loopgate writes instead.
var runtimeRenames = map[string]string{
	"go_cgo_calls_count": "go_cgo_calls_total",
	"go_gc_forced_count": "go_gc_forced_total",
	"go_cpu_count":       "go_cpus",
}

// runtimeFamilies describe the go_* and process_* families that
// metrics.WriteProcessMetrics and WriteFDMetrics write. A family missing
// here (a newer library version's) is still described, by its name's
// suffix, with a generic HELP.
var runtimeFamilies = map[string]runtimeFamily{
	"go_cgo_calls_total":                  {"counter", "Calls from Go to C made by the process."},
	"go_cpus":                             {"gauge", "Logical CPUs usable by the process (runtime.NumCPU)."},
	"go_gc_cpu_seconds_total":             {"counter", "CPU time spent by the garbage collector."},
	"go_gc_duration_seconds":              {"summary", "Stop-the-world pause durations of the garbage collector."},
	"go_gc_forced_total":                  {"counter", "Garbage collections forced by the application (runtime.GC)."},
	"go_gc_mark_assist_cpu_seconds_total": {"counter", "CPU time goroutines spent assisting the garbage collector."},
	"go_gc_pauses_seconds":                {"histogram", "Stop-the-world pause latencies of the garbage collector."},
	"go_gomaxprocs":                       {"gauge", "GOMAXPROCS: the OS threads that can run Go code at once."},
	"go_goroutines":                       {"gauge", "Goroutines that currently exist."},
	"go_info":                             {"gauge", "Always 1; the label names the Go version."},
	"go_info_ext":                         {"gauge", "Always 1; the labels name the compiler, GOOS, GOARCH and GOROOT."},
	"go_memlimit_bytes":                   {"gauge", "The Go runtime's soft memory limit (GOMEMLIMIT)."},
	"go_memstats_alloc_bytes":             {"gauge", "Bytes of allocated heap objects."},
	"go_memstats_alloc_bytes_total":       {"counter", "Bytes allocated for heap objects, freed ones included."},
	"go_memstats_buck_hash_sys_bytes":     {"gauge", "Bytes of memory in profiling bucket hash tables."},
	"go_memstats_frees_total":             {"counter", "Heap objects freed."},
	"go_memstats_gc_cpu_fraction":         {"gauge", "Fraction of the CPU time available since the start used by the garbage collector."},
	"go_memstats_gc_sys_bytes":            {"gauge", "Bytes of memory in garbage collection metadata."},
	"go_memstats_heap_alloc_bytes":        {"gauge", "Bytes of allocated heap objects."},
	"go_memstats_heap_idle_bytes":         {"gauge", "Bytes in idle (unused) heap spans."},
	"go_memstats_heap_inuse_bytes":        {"gauge", "Bytes in in-use heap spans."},
	"go_memstats_heap_objects":            {"gauge", "Allocated heap objects."},
	"go_memstats_heap_released_bytes":     {"gauge", "Bytes of heap memory returned to the OS."},
	"go_memstats_heap_sys_bytes":          {"gauge", "Bytes of heap memory obtained from the OS."},
	"go_memstats_last_gc_time_seconds":    {"gauge", "When the last garbage collection finished, in Unix seconds."},
	"go_memstats_lookups_total":           {"counter", "Pointer lookups done by the runtime."},
	"go_memstats_mallocs_total":           {"counter", "Heap objects allocated."},
	"go_memstats_mcache_inuse_bytes":      {"gauge", "Bytes in mcache structures in use."},
	"go_memstats_mcache_sys_bytes":        {"gauge", "Bytes of memory obtained from the OS for mcache structures."},
	"go_memstats_mspan_inuse_bytes":       {"gauge", "Bytes in mspan structures in use."},
	"go_memstats_mspan_sys_bytes":         {"gauge", "Bytes of memory obtained from the OS for mspan structures."},
	"go_memstats_next_gc_bytes":           {"gauge", "Heap size at which the next garbage collection starts."},
	"go_memstats_other_sys_bytes":         {"gauge", "Bytes of memory in other runtime allocations."},
	"go_memstats_stack_inuse_bytes":       {"gauge", "Bytes in stack spans in use."},
	"go_memstats_stack_sys_bytes":         {"gauge", "Bytes of stack memory obtained from the OS."},
	"go_memstats_sys_bytes":               {"gauge", "Bytes of memory obtained from the OS in all."},
	"go_mutex_wait_seconds_total":         {"counter", "Time goroutines spent blocked on sync.Mutex or sync.RWMutex."},
	"go_scavenge_cpu_seconds_total":       {"counter", "CPU time spent returning memory to the OS."},
	"go_sched_latencies_seconds":          {"histogram", "Time goroutines spent runnable before running."},
	"go_threads":                          {"gauge", "OS threads the Go runtime created."},

	"process_cgroup_cpu_throttled_seconds_total":    {"counter", "Time the process's cgroup was throttled by its CPU quota."},
	"process_cpu_seconds_system_total":              {"counter", "CPU time the process spent in the kernel."},
	"process_cpu_seconds_total":                     {"counter", "CPU time the process spent, user and kernel."},
	"process_cpu_seconds_user_total":                {"counter", "CPU time the process spent in user space."},
	"process_io_read_bytes_total":                   {"counter", "Bytes the process read, page cache included."},
	"process_io_read_syscalls_total":                {"counter", "Read system calls the process made."},
	"process_io_storage_read_bytes_total":           {"counter", "Bytes the process read from storage."},
	"process_io_storage_written_bytes_total":        {"counter", "Bytes the process wrote to storage."},
	"process_io_write_syscalls_total":               {"counter", "Write system calls the process made."},
	"process_io_written_bytes_total":                {"counter", "Bytes the process wrote, page cache included."},
	"process_major_pagefaults_total":                {"counter", "Page faults of the process that needed disk I/O."},
	"process_max_fds":                               {"gauge", "The most file descriptors the process may open."},
	"process_minor_pagefaults_total":                {"counter", "Page faults of the process that needed no disk I/O."},
	"process_num_threads":                           {"gauge", "OS threads in the process."},
	"process_open_fds":                              {"gauge", "File descriptors the process has open."},
	"process_pressure_cpu_stalled_seconds_total":    {"counter", "Time all the cgroup's tasks waited for CPU (PSI full)."},
	"process_pressure_cpu_waiting_seconds_total":    {"counter", "Time some of the cgroup's tasks waited for CPU (PSI some)."},
	"process_pressure_io_stalled_seconds_total":     {"counter", "Time all the cgroup's tasks waited for I/O (PSI full)."},
	"process_pressure_io_waiting_seconds_total":     {"counter", "Time some of the cgroup's tasks waited for I/O (PSI some)."},
	"process_pressure_memory_stalled_seconds_total": {"counter", "Time all the cgroup's tasks waited for memory (PSI full)."},
	"process_pressure_memory_waiting_seconds_total": {"counter", "Time some of the cgroup's tasks waited for memory (PSI some)."},
	"process_resident_memory_anon_bytes":            {"gauge", "Resident anonymous memory of the process."},
	"process_resident_memory_bytes":                 {"gauge", "Resident memory of the process."},
	"process_resident_memory_file_bytes":            {"gauge", "Resident file-backed memory of the process."},
	"process_resident_memory_peak_bytes":            {"gauge", "The most resident memory the process has had."},
	"process_resident_memory_shared_bytes":          {"gauge", "Resident shared memory of the process."},
	"process_start_time_seconds":                    {"gauge", "When the process started, in Unix seconds."},
	"process_virtual_memory_bytes":                  {"gauge", "Virtual memory size of the process."},
	"process_virtual_memory_peak_bytes":             {"gauge", "The largest virtual memory size the process has had."},
}

// writeRuntimeSeries writes the library's runtime and process series with a
// HELP and TYPE line before each family, as the text format wants: the
// library writes none unless metrics.ExposeMetadata is on process-wide, and
// then with empty HELP texts. They are a few kilobytes, made in memory.
func writeRuntimeSeries(w textWriter) {
	var b bytes.Buffer
	metrics.WriteProcessMetrics(&b)
	metrics.WriteFDMetrics(&b)
	family := ""
	for rest := b.String(); rest != ""; {
		line, next, _ := strings.Cut(rest, "\n")
		rest = next
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if to, ok := runtimeRenames[name]; ok {
			line = to + line[len(name):]
			name = to
		}
		if f := runtimeFamilyOf(name, family); f != family {
			family = f
			desc, ok := runtimeFamilies[f]
			if !ok {
				desc = runtimeFamily{"gauge", "Go runtime or process figure " + f + "."}
				if strings.HasSuffix(f, "_total") {
					desc.typ = "counter"
				}
			}
			promWriter{b: w}.family(f, desc.typ, desc.help)
		}
		w.WriteString(line)
		w.WriteByte('\n')
	}
}

// runtimeFamilyOf is the family of the sample named name: a histogram's or
// summary's _bucket lines are its own, and its _sum and _count lines
// belong to the family written just before them (current).
func runtimeFamilyOf(name, current string) string {
	if base, ok := strings.CutSuffix(name, "_bucket"); ok {
		return base
	}
	for _, suffix := range [...]string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && base == current {
			return current
		}
	}
	return name
}
