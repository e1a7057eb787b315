package contract

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetryIfMissing(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "localclusters"}, "c")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no"))
	tests := []struct {
		name      string
		err       error
		wantAfter time.Duration
		wantErr   error
	}{
		{"missing object: look again later, no error", notFound, MissingObjectRetry, nil},
		{"other error: the step's error", forbidden, 0, forbidden},
		{"wrapped missing object", errors.Join(errors.New("reading"), notFound), MissingObjectRetry, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, err := RetryIfMissing(tt.err)
			if after != tt.wantAfter || !errors.Is(err, tt.wantErr) {
				t.Errorf("RetryIfMissing(%v) = %v, %v; want %v, %v", tt.err, after, err, tt.wantAfter, tt.wantErr)
			}
		})
	}
}
