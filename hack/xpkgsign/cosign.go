package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// password is cosign's: the key's password comes from COSIGN_PASSWORD.
func password(bool) ([]byte, error) {
	p, ok := os.LookupEnv("COSIGN_PASSWORD")
	if !ok {
		return nil, errors.New("set COSIGN_PASSWORD to the key's password (it may be empty)")
	}
	return []byte(p), nil
}

// keygen writes a new key pair as cosign.key and cosign.pub in dir. It
// replaces neither: with either there, it writes nothing, so no key is
// left without its pair.
func keygen(dir string) error {
	files := []string{filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")}
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			return fmt.Errorf("%s exists: keygen replaces no key", f)
		}
	}
	keys, err := cosign.GenerateKeyPair(password)
	if err != nil {
		return err
	}
	for i, b := range [][]byte{keys.PrivateBytes, keys.PublicBytes} {
		if err := os.WriteFile(files[i], b, 0o600); err != nil {
			return err
		}
	}
	fmt.Println("wrote cosign.key and cosign.pub")
	return nil
}

// sign signs the manifest ref names now (an image index for a multi-arch
// package) and adds the signature to those already in the registry.
func sign(ctx context.Context, ref name.Reference, keyFile string, ropts []remote.Option) (name.Digest, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return name.Digest{}, err
	}
	pass, err := password(false)
	if err != nil {
		return name.Digest{}, err
	}
	sv, err := cosign.LoadPrivateKey(key, pass, nil)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%s: %w", keyFile, err)
	}
	digest, err := digestOf(ref, ropts)
	if err != nil {
		return name.Digest{}, err
	}
	pl, err := payload.Cosign{Image: digest}.MarshalJSON()
	if err != nil {
		return name.Digest{}, err
	}
	raw, err := sv.SignMessage(bytes.NewReader(pl), options.WithContext(ctx))
	if err != nil {
		return name.Digest{}, err
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return name.Digest{}, err
	}
	oopts := ociremote.WithRemoteOptions(ropts...)
	se, err := ociremote.SignedEntity(digest, oopts)
	if err != nil {
		return name.Digest{}, err
	}
	if se, err = mutate.AttachSignatureToEntity(se, sig); err != nil {
		return name.Digest{}, err
	}
	return digest, ociremote.WriteSignatures(digest.Repository, se, oopts)
}

// verify checks that a signature by the public key in keyFile names the
// manifest ref names now, with the checks Crossplane's ImageConfig makes
// for a key authority (crossplane-runtime pkg/xpkg/signature) but the
// transparency log's.
func verify(ctx context.Context, ref name.Reference, keyFile string, ropts []remote.Option) (name.Digest, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return name.Digest{}, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%s: %w", keyFile, err)
	}
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return name.Digest{}, err
	}
	digest, err := digestOf(ref, ropts)
	if err != nil {
		return name.Digest{}, err
	}
	_, _, err = cosign.VerifyImageSignatures(ctx, digest, &cosign.CheckOpts{
		SigVerifier:        verifier,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		IgnoreTlog:         true,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(ropts...)},
	})
	return digest, err
}

// digestOf is the manifest ref names now: what is signed and what is
// verified, never the tag, which can be moved.
func digestOf(ref name.Reference, ropts []remote.Option) (name.Digest, error) {
	desc, err := remote.Head(ref, ropts...)
	if err != nil {
		return name.Digest{}, err
	}
	return ref.Context().Digest(desc.Digest.String()), nil
}
