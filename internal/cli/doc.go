// Package cli implements the capstan command line: one cobra command per
// file, each a thin layer over the package that does the work.
package cli
