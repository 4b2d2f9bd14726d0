package relayconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	"github.com/peerrelay/peerrelay/apis/relay/v1alpha1"
	"github.com/peerrelay/peerrelay/provider/resolve"
	"github.com/peerrelay/peerrelay/provider/tailnet"
)

// maxClients bounds the clients a clientCache keeps: one per set of
// settings in use. Past it the least recently used goes, so a tenant
// cycling through regions or Secrets costs only its own clients, not
// everyone's.
const maxClients = 64

// clientCache keeps API clients across reconciles, one per set of settings
// (endpoint, account, credentials): a Tailscale API client holds its OAuth
// token until it expires, and an AWS configuration its credentials cache,
// so the provider asks for a token once an hour, not once per reconcile of
// every RelayConfig. New settings (a rotated Secret) are a new key, and a
// new client.
type clientCache[T any] struct {
	mu      sync.Mutex // held across build: one client per settings
	clients *lru.Cache
}

// get returns the client for these settings, made by build when there is
// none yet.
func (c *clientCache[T]) get(settings []string, build func() (T, error)) (T, error) {
	key := sha256.Sum256([]byte(strings.Join(settings, "\x00")))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = lru.New(maxClients)
	}
	if client, ok := c.clients.Get(key); ok {
		return client.(T), nil
	}
	client, err := build()
	if err != nil {
		return client, err
	}
	c.clients.Add(key, client)
	return client, nil
}

// tailnetAPI returns the Tailscale API client of the provider config's
// OAuth client, kept across reconciles.
func (c *connector) tailnetAPI(ctx context.Context, t *v1alpha1.TailscaleAPI, mg *v1alpha1.RelayConfig) (tailnet.API, error) {
	cred, err := c.credentials(ctx, mg, t.OAuthSecretRef, "spec.tailscale.oauthSecretRef", v1alpha1.OAuthClientIDKey, v1alpha1.OAuthClientSecretKey)
	if err != nil {
		return nil, err
	}
	newAPI := c.newAPI
	if newAPI == nil {
		newAPI = func(baseURL, tn, id, secret string) (tailnet.API, error) { return tailnet.New(baseURL, tn, id, secret) }
	}
	id, secret := cred[v1alpha1.OAuthClientIDKey], cred[v1alpha1.OAuthClientSecretKey]
	api, err := c.apis.get([]string{t.BaseURL, t.Tailnet, id, secret}, func() (tailnet.API, error) { return newAPI(t.BaseURL, t.Tailnet, id, secret) })
	if err != nil {
		return nil, err
	}
	return countedAPI{api}, nil
}

// credentials reads the credentials Secret ref names (at field of the
// provider config) and returns its data; every key in required must be
// there. A namespaced ProviderConfig may only read Secrets in its own
// namespace; a ClusterProviderConfig may name any. crossplane-runtime's
// CommonCredentialExtractor reads one key per selector, and these Secrets
// carry two or three. No value reaches an error.
func (c *connector) credentials(ctx context.Context, mg *v1alpha1.RelayConfig, ref v1alpha1.SecretRef, field string, required ...string) (map[string]string, error) {
	ns := credentialsNamespace(mg, ref)
	s := &corev1.Secret{}
	if err := c.read.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, s); err != nil {
		return nil, fmt.Errorf("cannot get the credentials Secret %s/%s named by %s: %w", ns, ref.Name, field, err)
	}
	data := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		data[k] = string(v)
	}
	for _, k := range required {
		if data[k] == "" {
			return nil, fmt.Errorf("the credentials Secret %s/%s named by %s needs keys %s", ns, ref.Name, field, strings.Join(required, " and "))
		}
	}
	return data, nil
}

// credentialsNamespace is where the credentials Secret ref names is read:
// a namespaced ProviderConfig's own namespace, else the ref's, else the
// RelayConfig's.
func credentialsNamespace(mg *v1alpha1.RelayConfig, ref v1alpha1.SecretRef) string {
	if ref.Namespace == "" || mg.GetProviderConfigReference().Kind == v1alpha1.ProviderConfigKind {
		return mg.GetNamespace()
	}
	return ref.Namespace
}

// awsClients are the AWS clients of one provider config and region.
type awsClients struct {
	resolver *resolve.AWSResolver
	ec2      *ec2.Client
}

// awsClients returns the ELBv2 and EC2 clients for the provider config, the
// same ones while its settings and credentials stay the same.
func (c *connector) awsClients(ctx context.Context, a *v1alpha1.AWSConfig, mg *v1alpha1.RelayConfig) (*resolve.AWSResolver, *ec2.Client, error) {
	region := a.Region
	if p := mg.Spec.ForProvider.AWS; p != nil && p.Region != "" {
		region = p.Region
	}
	var cred map[string]string
	if a.Source == v1alpha1.AWSCredentialsSecret {
		if a.SecretRef == nil {
			return nil, nil, errors.New("provider config spec.aws.secretRef is required when spec.aws.source is Secret")
		}
		var err error
		if cred, err = c.credentials(ctx, mg, *a.SecretRef, "spec.aws.secretRef", v1alpha1.AWSAccessKeyIDKey, v1alpha1.AWSSecretAccessKeyKey); err != nil {
			return nil, nil, err
		}
	}
	fallback := resolve.RegionFromHostname(mg.Status.AtProvider.Hostname)
	settings := []string{string(a.Source), region, fallback, a.Endpoint,
		cred[v1alpha1.AWSAccessKeyIDKey], cred[v1alpha1.AWSSecretAccessKeyKey], cred[v1alpha1.AWSSessionTokenKey]}
	clients, err := c.aws.get(settings, func() (awsClients, error) {
		var opts []func(*awsconfig.LoadOptions) error
		if region != "" {
			opts = append(opts, awsconfig.WithRegion(region))
		}
		if cred != nil {
			opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cred[v1alpha1.AWSAccessKeyIDKey], cred[v1alpha1.AWSSecretAccessKeyKey], cred[v1alpha1.AWSSessionTokenKey])))
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return awsClients{}, fmt.Errorf("cannot load AWS configuration: %w", err)
		}
		if cfg.Region == "" {
			cfg.Region = fallback
		}
		var endpoint *string
		if a.Endpoint != "" {
			endpoint = aws.String(a.Endpoint)
		}
		ec2c := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = endpoint })
		return awsClients{
			resolver: &resolve.AWSResolver{ELB: elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = endpoint }), EC2: ec2c},
			ec2:      ec2c,
		}, nil
	})
	return clients.resolver, clients.ec2, err
}
