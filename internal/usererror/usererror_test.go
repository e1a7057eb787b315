package usererror_test

import (
	"errors"
	"fmt"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"capstan.dev/capstan/internal/usererror"
)

func TestIsSeesThroughAggregatesAndWrapping(t *testing.T) {
	notInstalled := usererror.Mark(errors.New("kind X of group g is not installed"))
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"bare":       {notInstalled, true},
		"wrapped":    {fmt.Errorf("reading: %w", notInstalled), true},
		"aggregated": {kerrors.NewAggregate([]error{errors.New("other"), fmt.Errorf("x: %w", usererror.Mark(errors.New("no contract label")))}), true},
		"other":      {kerrors.NewAggregate([]error{errors.New("other")}), false},
		"nil":        {usererror.Mark(nil), false},
	} {
		if got := usererror.Is(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
