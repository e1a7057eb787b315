package kubeadmconfig

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "capstan.dev/capstan/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/certs"
	"capstan.dev/capstan/internal/contract"
	"capstan.dev/capstan/internal/kubeadm"
	"capstan.dev/capstan/internal/usererror"
)

// Reasons of DataSecretAvailable and CertificatesAvailable while the
// bootstrap data cannot be written yet.
const (
	WaitingForClusterInfrastructureReason      = "WaitingForClusterInfrastructure"
	WaitingForControlPlaneEndpointReason       = "WaitingForControlPlaneEndpoint"
	WaitingForControlPlaneInitializationReason = "WaitingForControlPlaneInitialization"
	WaitingForInitLockReason                   = "WaitingForInitLock"
	WaitingForWorkloadClusterReason            = "WaitingForWorkloadCluster"
	InvalidConfigReason                        = "InvalidConfig"
	CertificatesMissingReason                  = "CertificatesMissing"
	CertificatesInvalidReason                  = "CertificatesInvalid"
)

// FormatKey is the data secret key naming the format of "value", as
// Cluster API's kubeadm bootstrap provider writes it.
const FormatKey = "format"

// lockRetry is how soon a config waiting for the init lock looks again in
// case its holder vanished without a Machine deletion event reaching us.
const lockRetry = 20 * time.Second

// workloadRetry is how soon to retry when the workload cluster could not
// be reached to create a bootstrap token.
const workloadRetry = 10 * time.Second

// tokenDataKey is the key of the bootstrap data secret that keeps the
// token this controller generated for the Machine's join, so that later
// reconciles keep exactly that token alive until the Node exists. Cluster
// API keeps it in the KubeadmConfig's spec instead; with the data it costs
// no write of its own, and it cannot differ from the token the machine
// was given. A token in the spec is the user's to manage.
const tokenDataKey = "bootstrap-token"

// generatedTokenAnnotation marks the token in spec.joinConfiguration as
// generated, where earlier Capstan versions kept it; such tokens are still
// refreshed.
const generatedTokenAnnotation = "bootstrap.capstan.dev/generated-token-id"

func (r *Reconciler) reconcile(ctx context.Context, s *scope) (time.Duration, error) {
	cfg, m, c := s.config, s.machine, s.cluster
	if cfg.Status.DataSecretName != "" {
		return r.refreshToken(ctx, s)
	}
	if name := ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""); name != "" {
		// The Machine already has data (moved from another management
		// cluster, or supplied): adopt it rather than write another.
		cfg.Status.DataSecretName = name
		cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
		return 0, nil
	}
	if cfg.Spec.Format == bootstrapv1.Ignition {
		s.wait(InvalidConfigReason, "spec.format ignition is not supported by Capstan's kubeadm bootstrap provider: use format cloud-config")
		return 0, nil
	}
	if !ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) {
		s.wait(WaitingForClusterInfrastructureReason, fmt.Sprintf("waiting for the infrastructure of Cluster %s to be provisioned", c.Name))
		return 0, nil
	}
	if !c.Spec.ControlPlaneEndpoint.IsValid() {
		s.wait(WaitingForControlPlaneEndpointReason, fmt.Sprintf("waiting for Cluster %s to have spec.controlPlaneEndpoint (host and port), normally set by its infrastructure provider", c.Name))
		return 0, nil
	}
	if m.Spec.Version == "" {
		s.wait(InvalidConfigReason, fmt.Sprintf("Machine %s has no spec.version: kubeadm needs the Kubernetes version; set it on the Machine or its template", m.Name))
		return 0, nil
	}
	_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
	if !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) {
		if !controlPlane {
			s.wait(WaitingForControlPlaneInitializationReason, fmt.Sprintf("waiting for the control plane of Cluster %s to be initialized before this worker joins", c.Name))
			return 0, nil
		}
		// A control plane Machine inits when its config says init, or says
		// neither; one that only says join (KubeadmControlPlane's second and
		// later Machines) waits to join.
		spec := &cfg.Spec
		if spec.JoinConfiguration.IsDefined() && !spec.InitConfiguration.IsDefined() {
			s.wait(WaitingForControlPlaneInitializationReason, fmt.Sprintf("waiting for the control plane of Cluster %s to be initialized before this control plane machine joins it", c.Name))
			return 0, nil
		}
		return r.reconcileInit(ctx, s)
	}
	// Initialized: whoever held the init lock is done with it.
	if err := r.releaseLock(ctx, c); err != nil {
		return 0, err
	}
	return r.reconcileJoin(ctx, s, controlPlane)
}

func (r *Reconciler) reconcileInit(ctx context.Context, s *scope) (time.Duration, error) {
	cfg, m, c := s.config, s.machine, s.cluster
	log := ctrl.LoggerFrom(ctx)
	holder, acquired := m.Name, true
	if !controlledByControlPlane(m) {
		var err error
		if holder, acquired, err = r.acquireLock(ctx, c, m); err != nil {
			return 0, err
		}
	}
	if !acquired {
		msg := "waiting for another control plane machine to initialize the control plane"
		if holder != "" {
			msg = fmt.Sprintf("waiting for Machine %s to initialize the control plane of Cluster %s", holder, c.Name)
		}
		s.wait(WaitingForInitLockReason, msg)
		return lockRetry, nil
	}
	log.V(1).Info("Init lock held, this machine initializes the control plane", "machine", m.Name)
	var lifetime time.Duration
	if d := cfg.Spec.ClusterConfiguration.CACertificateValidityPeriodDays; d > 0 {
		lifetime = time.Duration(d) * 24 * time.Hour
	}
	keyAlgorithm := certs.FromEncryptionAlgorithm(cfg.Spec.ClusterConfiguration.EncryptionAlgorithm)
	// The Cluster owns what is generated for the whole cluster (certificates,
	// kubeconfig, the init lock): it lives as long as the Cluster, whichever
	// Machine happened to create it.
	cc, err := certs.LookupOrGenerate(ctx, r.Client, client.ObjectKeyFromObject(c), contract.ClusterOwner(c),
		certs.WithCALifetime(lifetime), certs.WithKeyAlgorithm(keyAlgorithm))
	if err != nil {
		s.certs = &certsState{reason: CertificatesInvalidReason, message: err.Error()}
		return 0, usererror.Mark(err)
	}
	s.certs = &certsState{ok: true}
	endpoint := kubeadm.JoinEndpoint(c.Spec.ControlPlaneEndpoint)
	if !c.Spec.ControlPlaneRef.IsDefined() {
		// Bare control-plane Machines have no control plane provider to
		// write the admin kubeconfig; without it nobody reaches the cluster.
		if err := certs.EnsureKubeconfig(ctx, r.Client, c, endpoint, cc.CA, keyAlgorithm, contract.ClusterOwner(c)); err != nil {
			return 0, err
		}
	}
	kubeadmFile, err := kubeadm.RenderInit(cfg.Spec.ClusterConfiguration, cfg.Spec.InitConfiguration, m.Spec.Version, c.Name, endpoint, &c.Spec.ClusterNetwork)
	if err != nil {
		return 0, usererror.Mark(err)
	}
	certFiles, err := cc.Files(cfg.Spec.ClusterConfiguration.CertificatesDir)
	if err != nil {
		return 0, err
	}
	return r.writeData(ctx, s, kubeadmFile, certFiles, false)
}

func (r *Reconciler) reconcileJoin(ctx context.Context, s *scope, controlPlane bool) (time.Duration, error) {
	cfg, c := s.config, s.cluster
	key := client.ObjectKeyFromObject(c)
	cc, err := certs.Lookup(ctx, r.Client, key)
	switch {
	case certs.IsMissing(err) && (controlPlane || cc.CA == nil):
		s.certs = &certsState{reason: CertificatesMissingReason, message: err.Error()}
		s.wait(CertificatesMissingReason, err.Error())
		return lockRetry, nil
	case err != nil && !certs.IsMissing(err):
		s.certs = &certsState{reason: CertificatesInvalidReason, message: err.Error()}
		return 0, usererror.Mark(err)
	}
	s.certs = &certsState{ok: true}

	join := *cfg.Spec.JoinConfiguration.DeepCopy()
	if controlPlane && join.ControlPlane == nil {
		join.ControlPlane = &bootstrapv1.JoinControlPlane{}
	}
	var requeue time.Duration
	if d := &join.Discovery; !d.File.IsDefined() {
		bt := &d.BootstrapToken
		if bt.APIServerEndpoint == "" {
			bt.APIServerEndpoint = kubeadm.JoinEndpoint(c.Spec.ControlPlaneEndpoint)
		}
		if len(bt.CACertHashes) == 0 && !ptr.Deref(bt.UnsafeSkipCAVerification, false) {
			bt.CACertHashes = cc.CACertHashes()
		}
		if bt.Token == "" {
			token, err := r.createToken(ctx, s)
			if err != nil {
				s.wait(WaitingForWorkloadClusterReason, fmt.Sprintf("creating a bootstrap token in the workload cluster: %v", err))
				return workloadRetry, nil
			}
			bt.Token = token
			s.generatedToken = token
			requeue = r.tokenTTL() / 2
		}
	}
	kubeadmFile, err := kubeadm.RenderJoin(join, s.machine.Spec.Version)
	if err != nil {
		return 0, usererror.Mark(err)
	}
	var certFiles []certs.File
	if controlPlane {
		if certFiles, err = cc.Files(cfg.Spec.ClusterConfiguration.CertificatesDir); err != nil {
			return 0, err
		}
	}
	after, err := r.writeData(ctx, s, kubeadmFile, certFiles, true)
	if after == 0 {
		after = requeue
	}
	return after, err
}

// writeData resolves the user's files and passwords, renders the
// cloud-config and writes the data secret.
func (r *Reconciler) writeData(ctx context.Context, s *scope, kubeadmFile []byte, certFiles []certs.File, join bool) (time.Duration, error) {
	cfg := s.config
	bd := bootstrapData{spec: &cfg.Spec, kubeadmConfig: kubeadmFile, join: join, passwords: map[int]string{}}
	for i, f := range cfg.Spec.Files {
		content := f.Content
		if f.ContentFrom.IsDefined() {
			v, err := r.secretValue(ctx, cfg.Namespace, f.ContentFrom.Secret.Name, f.ContentFrom.Secret.Key, fmt.Sprintf("spec.files[%d].contentFrom", i))
			if err != nil {
				s.wait(InvalidConfigReason, err.Error())
				return 0, usererror.Mark(err)
			}
			content = v
		}
		bd.files = append(bd.files, userFile(f, content))
	}
	for i, u := range cfg.Spec.Users {
		switch {
		case u.PasswdFrom.IsDefined():
			v, err := r.secretValue(ctx, cfg.Namespace, u.PasswdFrom.Secret.Name, u.PasswdFrom.Secret.Key, fmt.Sprintf("spec.users[%d].passwdFrom", i))
			if err != nil {
				s.wait(InvalidConfigReason, err.Error())
				return 0, usererror.Mark(err)
			}
			bd.passwords[i] = v
		case u.Passwd != "":
			bd.passwords[i] = u.Passwd
		}
	}
	for _, f := range certFiles {
		bd.certFiles = append(bd.certFiles, cloudFile{Path: f.Path, Owner: "root:root", Permissions: f.Permissions, Content: string(f.Content)})
	}
	value, err := bd.render()
	if err != nil {
		return 0, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cfg.Namespace, Name: cfg.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig", Name: cfg.Name, UID: cfg.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type: certs.ClusterSecretType,
		Data: map[string][]byte{"value": value, FormatKey: []byte(bootstrapv1.CloudConfig)},
	}
	if s.generatedToken != "" {
		secret.Data[tokenDataKey] = []byte(s.generatedToken)
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating bootstrap data secret %s: %w", cfg.Name, err)
		}
		// Left by a reconcile that stopped before recording it in status.
		existing := &corev1.Secret{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
			return 0, err
		}
		if !ownedBy(existing, cfg.UID) {
			err := fmt.Errorf("secret %s/%s exists and does not belong to KubeadmConfig %s: delete or rename it so the bootstrap data can be written", cfg.Namespace, cfg.Name, cfg.Name)
			s.wait(InvalidConfigReason, err.Error())
			return 0, usererror.Mark(err)
		}
		if !bytes.Equal(existing.Data["value"], value) || string(existing.Data[FormatKey]) != string(bootstrapv1.CloudConfig) {
			existing.Data = secret.Data
			if err := r.Client.Update(ctx, existing); err != nil {
				return 0, fmt.Errorf("updating bootstrap data secret %s: %w", cfg.Name, err)
			}
		}
	}
	cfg.Status.DataSecretName = secret.Name
	cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	action := "init"
	if join {
		action = "join"
	}
	// A log line, not an event: every Machine gets its data secret, and its
	// BootstrapConfigReady condition already says so; events are API writes.
	ctrl.LoggerFrom(ctx).V(1).Info("Wrote bootstrap data secret", "secret", secret.Name, "kubeadm", action, "machine", s.machine.Name)
	return 0, nil
}

func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// secretValue reads one key of a Secret the user points at.
func (r *Reconciler) secretValue(ctx context.Context, namespace, name, key, field string) (string, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%s: secret %s/%s does not exist: create it or fix the name", field, namespace, name)
		}
		return "", err
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("%s: secret %s/%s has no key %q: add it or fix the key", field, namespace, name, key)
	}
	return string(v), nil
}
