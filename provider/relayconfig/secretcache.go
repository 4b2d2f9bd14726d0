package relayconfig

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerrelay/peerrelay/provider/tsconfig"
)

// The cache keeps of each Secret only what the provider reads. The label
// it selects on (CachedSecrets) is one any tenant may set, so a tenant could
// otherwise grow the shared provider by 1 MiB per Secret until it is
// killed; stripped, a Secret costs the cache at most about maxCachedBytes
// of data and a few labels and annotations.
const (
	// maxCachedValue bounds every value kept but the config file: device
	// IDs, key references and minted keys are tens of bytes.
	maxCachedValue = 512
	// maxCachedConfig bounds the config file: a rendered config with the
	// largest spec the schema allows (and an Inline key, at most
	// maxCachedValue) is under 4 KiB.
	maxCachedConfig = 8 << 10
	// maxCachedKeys bounds how many data keys are kept.
	maxCachedKeys = 4
	// strippedKey marks a Secret that held more than the cache keeps: its
	// data is not what the provider wrote (a config Secret so marked is
	// never up to date, and is rewritten).
	strippedKey = "relay.peerrelay.io/stripped"
)

// StripSecret is the manager's cache transform for Secrets: it drops
// managed fields, labels and annotations the provider does not read, and
// data keys other than those it reads, and any value over its bound.
// Other objects pass unchanged.
func StripSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	s.ManagedFields, s.Finalizers = nil, nil
	// The controller reference is what the provider reads (IsControlledBy);
	// others, any number a tenant writes, are not kept.
	if c := metav1.GetControllerOfNoCopy(s); c != nil {
		s.OwnerReferences = []metav1.OwnerReference{*c}
	} else {
		s.OwnerReferences = nil
	}
	maps.DeleteFunc(s.Labels, func(k, _ string) bool { return k != LabelManagedBy && k != labelRelay })
	maps.DeleteFunc(s.Annotations, func(k, v string) bool {
		return (k != annotationKeyExpires && k != annotationKeyID && k != annotationKeyMinted) || len(v) > maxCachedValue
	})
	data, n := make(map[string][]byte, min(len(s.Data), maxCachedKeys+1)), 0
	for k, v := range s.Data {
		limit, read := cachedValueLimit(k)
		if !read || len(v) > limit || n == maxCachedKeys {
			data[strippedKey] = nil
			continue
		}
		data[k], n = v, n+1
	}
	s.Data = data
	return s, nil
}

// cachedValueLimit says whether the provider reads data key k, and the
// largest value of it the cache keeps.
func cachedValueLimit(k string) (int, bool) {
	switch {
	case k == tsconfig.FileName:
		return maxCachedConfig, true
	case k == stateSecretDeviceIDKey, k == stateSecretReissueKey, strings.HasPrefix(k, mintedDataKey("")):
		return maxCachedValue, true
	}
	return 0, false
}
