package kit_test

import (
	"errors"
	"fmt"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"capstan.dev/capstan/internal/kit"
)

func TestIsUserErrorSeesThroughAggregatesAndWrapping(t *testing.T) {
	notInstalled := kit.UserFix(errors.New("kind X of group g is not installed"))
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"bare":       {notInstalled, true},
		"wrapped":    {fmt.Errorf("reading: %w", notInstalled), true},
		"aggregated": {kerrors.NewAggregate([]error{errors.New("other"), fmt.Errorf("x: %w", kit.UserFix(errors.New("no contract label")))}), true},
		"other":      {kerrors.NewAggregate([]error{errors.New("other")}), false},
		"nil":        {kit.UserFix(nil), false},
	} {
		if got := kit.IsUserError(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
