// Command xpkgsign signs our packages in a registry with a cosign key pair,
// and verifies them, as a platform does before it installs them.
//
//	xpkgsign keygen                  write cosign.key and cosign.pub here
//	xpkgsign sign -key cosign.key REF...
//	xpkgsign verify -key cosign.pub REF...
//
// The key pair is cosign's (cosign.key encrypted with COSIGN_PASSWORD, as
// `cosign generate-key-pair` writes it), and so is the signature: a
// simple-signing payload naming the package's manifest digest, in the
// registry's sha256-<digest>.sig tag, the format `cosign sign --key` writes
// and Crossplane's ImageConfig verification reads. Verification is
// cosign's VerifyImageSignatures with the options Crossplane builds for a
// key authority, except the transparency log: these signatures are not in
// Sigstore's public log, which cannot be reached from where the tests run
// (README, "Signatures").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx := context.Background()
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	key := fs.String("key", "", "cosign.key to sign with, cosign.pub to verify with")
	_ = fs.Parse(args)
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	var err error
	switch cmd {
	case "keygen":
		err = keygen(".")
	case "sign":
		err = each(fs.Args(), *key, func(ref name.Reference) error {
			d, err := sign(ctx, ref, *key, ropts)
			if err == nil {
				fmt.Printf("%s: signed %s\n", ref, d.DigestStr())
			}
			return err
		})
	case "verify":
		err = each(fs.Args(), *key, func(ref name.Reference) error {
			d, err := verify(ctx, ref, *key, ropts)
			if err == nil {
				fmt.Printf("%s: %s verified with %s\n", ref, d.DigestStr(), *key)
			}
			return err
		})
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xpkgsign:", err)
		os.Exit(1)
	}
}

// each runs f for every reference, stopping at the first failure.
func each(refs []string, key string, f func(name.Reference) error) error {
	if key == "" || len(refs) == 0 {
		usage()
	}
	for _, r := range refs {
		ref, err := name.ParseReference(r)
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		if err := f(ref); err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
	}
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: xpkgsign keygen | sign -key cosign.key REF... | verify -key cosign.pub REF...")
	os.Exit(2)
}
