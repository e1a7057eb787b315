package plan

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// The results of compareKube. Besides lower, equal and higher, two versions
// that differ only in build metadata made of words (a commit hash, a
// vendor's tag) cannot be put in order: they are just different.
const (
	versionLower     = -1
	versionEqual     = 0
	versionHigher    = 1
	versionUnordered = 2
)

// kubeVersion is a Kubernetes version as written (so that the decision
// writes back exactly what the topology or the class spelled) and as parsed.
type kubeVersion struct {
	raw string
	sem *version.Version
}

func parseKube(s string) (kubeVersion, error) {
	v, err := version.ParseSemantic(s)
	if err != nil {
		return kubeVersion{}, err
	}
	return kubeVersion{raw: s, sem: v}, nil
}

func (v kubeVersion) minor() uint { return v.sem.Minor() }

// compareKube orders a against b by semantic version (pre-releases count);
// when withBuild is set and they tie, their build metadata decides, piece
// by piece: numbers by value and below words, words only by equality
// (versionUnordered when they differ), a longer list above its prefix.
func compareKube(a, b kubeVersion, withBuild bool) int {
	switch {
	case a.sem.LessThan(b.sem):
		return versionLower
	case b.sem.LessThan(a.sem):
		return versionHigher
	case !withBuild:
		return versionEqual
	}
	pa, pb := buildPieces(a.sem.BuildMetadata()), buildPieces(b.sem.BuildMetadata())
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if c := compareBuildPiece(pa[i], pb[i]); c != versionEqual {
			return c
		}
	}
	switch {
	case len(pa) < len(pb):
		return versionLower
	case len(pa) > len(pb):
		return versionHigher
	}
	return versionEqual
}

func buildPieces(meta string) []string {
	if meta == "" {
		return nil
	}
	return strings.Split(meta, ".")
}

func compareBuildPiece(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		switch {
		case na < nb:
			return versionLower
		case na > nb:
			return versionHigher
		}
		return versionEqual
	case errA == nil:
		return versionLower
	case errB == nil:
		return versionHigher
	case a == b:
		return versionEqual
	}
	return versionUnordered
}

// sameKube reports whether a and b are the same version, build metadata
// included ("1.31.0" and "v1.31.0" are the same).
func sameKube(a, b kubeVersion) bool { return compareKube(a, b, true) == versionEqual }
