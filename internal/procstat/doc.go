// Package procstat reads a Linux process's resource use from /proc: its
// resident memory, peak resident memory and CPU time. The bench command and
// the tests that print figures share it.
package procstat
