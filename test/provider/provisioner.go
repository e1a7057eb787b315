package provider

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Provisioner plays the provider's controllers for tests that want
// machines to come up on their own: bootstrap configs get a data secret,
// infrastructure machines get a providerID and an address, and a Ready Node
// with that providerID registers in the workload cluster — all through the
// contract, as a real provider would.
type Provisioner struct {
	// Client reaches the management cluster.
	Client client.Client
	// Workload reaches the workload cluster, where Nodes register.
	Workload client.Client
}

// SetupWithManager starts the provisioner's controllers.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	bootstrap := &unstructured.Unstructured{}
	bootstrap.SetGroupVersionKind(BootstrapConfig.GVK())
	if err := ctrl.NewControllerManagedBy(mgr).For(bootstrap).Named("test-bootstrap").Complete(reconcilerFunc(p.reconcileBootstrap)); err != nil {
		return err
	}
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(InfraMachine.GVK())
	return ctrl.NewControllerManagedBy(mgr).For(infra).Named("test-infrastructure").Complete(reconcilerFunc(p.reconcileMachine))
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

func (p *Provisioner) get(ctx context.Context, k Kind, key client.ObjectKey) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK())
	err := p.Client.Get(ctx, key, u)
	return u, err
}

func (p *Provisioner) reconcileBootstrap(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg, err := p.get(ctx, BootstrapConfig, req.NamespacedName)
	if err != nil || !cfg.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if done, _, _ := unstructured.NestedBool(cfg.Object, "status", "initialization", "dataSecretCreated"); done {
		return ctrl.Result{}, nil
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cfg.GetNamespace(), Name: cfg.GetName() + "-data",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cfg.GetAPIVersion(), Kind: cfg.GetKind(), Name: cfg.GetName(), UID: cfg.GetUID(), Controller: ptr.To(true)}},
		},
		Data: map[string][]byte{"value": []byte("#cloud-config\n")},
	}
	if err := p.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, SetStatus(ctx, p.Client, cfg, map[string]any{
		"initialization": map[string]any{"dataSecretCreated": true},
		"dataSecretName": secret.Name,
	})
}

func (p *Provisioner) reconcileMachine(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m, err := p.get(ctx, InfraMachine, req.NamespacedName)
	if err != nil || !m.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A real provider waits for its Machine before it boots anything.
	owned := false
	for _, ref := range m.GetOwnerReferences() {
		owned = owned || (ref.Kind == "Machine" && ptr.Deref(ref.Controller, false))
	}
	if !owned {
		return ctrl.Result{}, nil
	}
	providerID := fmt.Sprintf("test://%s/%s", m.GetNamespace(), m.GetName())
	if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != providerID {
		if err := unstructured.SetNestedField(m.Object, providerID, "spec", "providerID"); err != nil {
			return ctrl.Result{}, err
		}
		if err := p.Client.Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := p.registerNode(ctx, m.GetNamespace()+"-"+m.GetName(), providerID); err != nil {
		return ctrl.Result{}, err
	}
	if done, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "provisioned"); done {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, SetStatus(ctx, p.Client, m, map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"addresses":      []any{map[string]any{"type": "InternalIP", "address": "10.0.0.1"}},
	})
}

// registerNode creates a Ready Node, as a kubelet joining would.
func (p *Provisioner) registerNode(ctx context.Context, name, providerID string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := p.Workload.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.35.0", OSImage: "Capstan test provider"}
	return p.Workload.Status().Update(ctx, node)
}
