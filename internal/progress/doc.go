// Package progress shows what a long command is waiting on. On a terminal
// the state is a small block redrawn in place (a summary with the elapsed
// time, and one line per thing still waited on); anywhere else — a pipe, a
// log file, CI — it is a plain timestamped line each time the summary
// changes, so scripts and logs see every step and no escape codes.
package progress
