package relayconfig

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
)

// Where a minted key lives and what tailscaled writes into its state Secret.
const (
	mintedKeyDataKey       = "authkey"
	annotationKeyExpires   = "relay.peerrelay.io/authkey-expires"
	annotationKeyID        = "relay.peerrelay.io/authkey-id"
	stateSecretDeviceIDKey = "device_id"
)

// authKey returns what the config's AuthKey says: a file path by default,
// so the config Secret carries no credential, or the key itself when the
// RelayConfig asks for Inline. With no auth key Secret named and Tailscale
// API access configured, the provider mints one. The key never reaches an
// error or a log.
//
// Once the replica's device exists (device, from its state) the config carries
// no key at all: tailscaled logs in from its state, and a restarted pod must
// not depend on a key Secret deleted after enrolment or a single-use key
// already spent (the pod mounts the key Secret as optional).
func (e *external) authKey(ctx context.Context, mg *v1alpha1.RelayConfig, device string) (string, error) {
	if device != "" && !meta.WasDeleted(mg) {
		return "", nil
	}
	ref := mg.Spec.ForProvider.AuthKeySecretRef
	if ref == nil {
		if e.api == nil {
			return "", nil // the user logs the device in some other way
		}
		return e.mintedKey(ctx, mg)
	}
	key := ref.Key
	if key == "" {
		key = "authkey"
	}
	if ref.Mode != v1alpha1.AuthKeyModeInline {
		dir := ref.MountPath
		if dir == "" {
			dir = v1alpha1.DefaultAuthKeyMountPath
		}
		return "file:" + path.Join(dir, key), nil
	}
	s := &corev1.Secret{}
	if err := e.read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, s); err != nil {
		return "", fmt.Errorf("cannot get the auth key Secret %s named by spec.forProvider.authKeySecretRef: %w", ref.Name, err)
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("the auth key Secret %s has no key %q (spec.forProvider.authKeySecretRef.key)", ref.Name, key)
	}
	return string(bytes.TrimSpace(v)), nil
}

// stateSecret returns the replica's state Secret, or nil when it is
// missing (or the RelayConfig names none).
func (e *external) stateSecret(ctx context.Context, mg *v1alpha1.RelayConfig) (*corev1.Secret, error) {
	name := mg.Spec.ForProvider.StateSecretName
	if name == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: name}, s)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get state Secret %s named by spec.forProvider.stateSecretName: %w", name, err)
	}
	return s, nil
}

// deviceID records the device ID containerboot wrote into the state
// Secret, whenever it appears, and returns the last one recorded (the state
// Secret may be gone).
func deviceID(mg *v1alpha1.RelayConfig, state *corev1.Secret) string {
	if state != nil {
		if id := string(state.Data[stateSecretDeviceIDKey]); id != "" {
			mg.Status.AtProvider.DeviceID = id
		}
	}
	return mg.Status.AtProvider.DeviceID
}

// loggedIn returns the device ID in the state Secret now: a device whose
// state is gone (the Secret deleted by hand) must log in again, with a key.
func loggedIn(state *corev1.Secret) string {
	if state == nil {
		return ""
	}
	return string(state.Data[stateSecretDeviceIDKey])
}

// createStateSecret creates the replica's empty state Secret, controlled by
// the RelayConfig so it lives exactly as long as the replica: a restarted
// pod keeps its device identity, and the device ID is still there to read
// when the RelayConfig is deleted. It is the provider's, not a composed
// resource, because containerboot writes it often and every write to a
// composed resource is a watch event on the PeerRelay.
func (e *external) createStateSecret(ctx context.Context, mg *v1alpha1.RelayConfig) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: mg.Spec.ForProvider.StateSecretName, Namespace: mg.GetNamespace(),
			Labels: map[string]string{LabelManagedBy: ManagedBy, labelRelay: mg.GetName()},
		},
		Type: corev1.SecretTypeOpaque,
	}
	meta.AddOwnerReference(s, meta.AsController(meta.TypedReferenceTo(mg, v1alpha1.RelayConfigGroupVersionKind)))
	if err := e.kube.Create(ctx, s); err != nil && !kerrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create state Secret %s: %w", s.Name, err)
	}
	return nil
}

// mintedKey makes sure Secret <name>-authkey holds a usable key and returns
// the config's reference to it. authKey calls it only while the replica has
// no device: once tailscaled has logged in, its state Secret carries the
// device ID and the key is never needed (or re-sent) again. An unused key
// that expired is replaced.
func (e *external) mintedKey(ctx context.Context, mg *v1alpha1.RelayConfig) (string, error) {
	name := mg.GetName() + v1alpha1.MintedAuthKeySuffix
	ref := "file:" + path.Join(v1alpha1.DefaultAuthKeyMountPath, mg.GetName(), mintedKeyDataKey)
	if meta.WasDeleted(mg) {
		return ref, nil // never mint for a replica on its way out
	}
	s := &corev1.Secret{}
	err := e.kube.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: name}, s)
	switch {
	case err == nil:
		mg.Status.AtProvider.AuthKeyID = s.Annotations[annotationKeyID]
		expires, _ := time.Parse(time.RFC3339, s.Annotations[annotationKeyExpires])
		if time.Now().Before(expires) {
			return ref, nil
		}
	case kerrors.IsNotFound(err):
		s = nil
	default:
		return "", fmt.Errorf("cannot get minted auth key Secret %s: %w", name, err)
	}

	id, key, expires, err := e.api.CreateAuthKey(ctx, mg.Spec.ForProvider.Tags, "peer relay "+mg.GetNamespace()+"/"+mg.GetName())
	if err != nil {
		return "", err
	}
	annotations := map[string]string{annotationKeyExpires: expires.UTC().Format(time.RFC3339), annotationKeyID: id}
	data := map[string][]byte{mintedKeyDataKey: []byte(key)}
	if s != nil {
		s.Annotations, s.Data = annotations, data
		if err := e.kube.Update(ctx, s); err != nil {
			return "", fmt.Errorf("cannot update minted auth key Secret %s: %w", name, err)
		}
	} else {
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: mg.GetNamespace(), Annotations: annotations,
				Labels: map[string]string{LabelManagedBy: ManagedBy, labelRelay: mg.GetName()},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		meta.AddOwnerReference(s, meta.AsController(meta.TypedReferenceTo(mg, v1alpha1.RelayConfigGroupVersionKind)))
		if err := e.kube.Create(ctx, s); err != nil {
			return "", fmt.Errorf("cannot create minted auth key Secret %s: %w", name, err)
		}
	}
	mg.Status.AtProvider.AuthKeyID = id
	return ref, nil
}
