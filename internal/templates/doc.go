// Package templates holds Capstan's built-in cluster templates and renders
// them: ${VAR} and ${VAR:=default} references are replaced from the given
// variables. Rendering is all or nothing: every variable without a value is
// reported by name, and no half-rendered manifest is ever returned.
package templates
