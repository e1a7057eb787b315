// Package index holds the cache index Capstan's controllers list a
// cluster's objects by. A label selector makes the cache test every object
// of the namespace and copy the matches; with a thousand clusters in one
// namespace that scan was most of the manager's CPU. The index hands back
// only the cluster's own objects.
package index
