package kit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/pace"
	"capstan.dev/capstan/internal/patch"
	"capstan.dev/capstan/internal/usererror"
)

// Reconciler runs one controller's reconcile of objects of type O with a
// scope of type S. A controller fills in its parts once, when it is set up,
// and hands requests to Reconcile.
type Reconciler[O client.Object, S any] struct {
	// Client reads the object, normally from the manager's cache.
	Client client.Client
	// Writer writes the object's changes; Client when nil. Give it a field
	// owner (client.WithFieldOwner) when the controller's writes need one.
	Writer client.Client
	// NewObject returns an empty O to read into.
	NewObject func() O

	// Pacer remembers the controller's writes (nil: no pacing). With one,
	// a copy older than the controller's own last write is not acted on,
	// and status changes that leave Gate's pick alone are paced.
	Pacer *pace.Pacer
	Gate  pace.Gate
	// Options are further options of the patch helper; OptionsFor, when
	// set, adds options that depend on the object.
	Options    []patch.Option
	OptionsFor func(O) []patch.Option

	// Scope gathers what the reconcile needs to know about obj (its
	// Cluster, its owner) into the scope the steps share. An error ends the
	// reconcile before anything is reported or written; NotYet ends it
	// quietly with a requeue.
	Scope func(ctx context.Context, obj O) (S, error)
	// Run does the reconcile proper: pause, deletion, finalizer, steps.
	Run func(ctx context.Context, s S) (ctrl.Result, error)
	// Gone, when set, hears of an object that no longer exists, for a
	// controller that keeps memory of objects outside the API.
	Gone func(key client.ObjectKey)
	// Report computes the object's status from the scope just before it is
	// written; it may leave the status alone (paused, too little known).
	// Nil reports nothing.
	Report func(s S)

	// prepared is what is the same for every reconcile, worked out from the
	// fields above once, at the first reconcile (they do not change once
	// the controller runs).
	prepare  sync.Once
	prepared prepared
}

// prepared is the part of a reconcile's plumbing that does not depend on
// the object.
type prepared struct {
	writer client.Client
	// options are the patch helper's options that do not depend on the
	// object, with their length as capacity so that appending the object's
	// own ones copies instead of sharing between workers.
	options []patch.Option
}

func (k *Reconciler[O, S]) prepareOnce() prepared {
	k.prepare.Do(func() {
		p := prepared{writer: k.Writer}
		if p.writer == nil {
			p.writer = k.Client
		}
		p.options = append(p.options, k.Options...)
		if k.Pacer != nil {
			// Pace sets only the helper's pacer, which no other option
			// touches: it may come before OptionsFor's options.
			p.options = append(p.options, patch.Pace(k.Pacer, k.Gate))
		}
		p.options = slices.Clip(p.options)
		k.prepared = p
	})
	return k.prepared
}

// notYet is the error Scope returns for an object that cannot be reconciled
// yet, with nothing to report either.
type notYet struct{ after time.Duration }

func (n notYet) Error() string { return "not ready to be reconciled yet" }

// NotYet is what Scope returns when the object cannot be reconciled yet and
// there is nothing to report (its owner has not been set): the reconcile
// ends without a write or an error, and comes back after the given delay (0:
// only an event brings it back).
func NotYet(after time.Duration) error { return notYet{after: after} }

// Reconcile reconciles the object the request names.
func (k *Reconciler[O, S]) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	obj := k.NewObject()
	if err := k.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) && k.Gone != nil {
			k.Gone(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if k.Pacer.Behind(obj) {
		// The cache has not caught up with our own last write; its watch
		// event is on the way.
		return ctrl.Result{RequeueAfter: pace.StaleRetry}, nil
	}
	p := k.prepareOnce()
	opts := p.options
	if k.OptionsFor != nil {
		opts = append(opts, k.OptionsFor(obj)...)
	}
	helper, err := patch.NewHelper(obj, p.writer, opts...)
	if err != nil {
		return ctrl.Result{}, err
	}
	s, err := k.Scope(ctx, obj)
	if err != nil {
		var wait notYet
		if errors.As(err, &wait) {
			return ctrl.Result{RequeueAfter: wait.after}, nil
		}
		return ctrl.Result{}, err
	}
	defer func() {
		if reterr != nil && usererror.Is(reterr) {
			res, reterr = ctrl.Result{RequeueAfter: usererror.Retry}, nil
		}
		if k.Report != nil {
			k.Report(s)
		}
		if err := helper.Patch(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		if reterr == nil {
			// A held-back status change must still go out.
			res.RequeueAfter = Soonest(res.RequeueAfter, helper.Deferred())
		}
	}()
	return k.Run(ctx, s)
}

// GetCluster reads the Cluster an object belongs to; nil, without an error,
// when it does not exist (yet, or any more): most reconciles then have
// something to say rather than an error to return.
func GetCluster(ctx context.Context, c client.Reader, namespace, name string) (*clusterv1.Cluster, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return cluster, nil
}
