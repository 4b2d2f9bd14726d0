// Package tailnet calls the Tailscale API: it mints single-use,
// pre-authorised, tagged auth keys for relay replicas, and looks up and
// removes a replica's device when the replica goes away.
package tailnet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	tsapi "tailscale.com/client/tailscale/v2"
)

// DefaultBaseURL is Tailscale's API.
const DefaultBaseURL = "https://api.tailscale.com"

// KeyExpiry is how long a minted key is valid. A key waits for its pod:
// for the node to be scaled up, the image to be pulled, a quota or a
// priority to let the pod in. An hour was too short for a cluster
// autoscaler on a bad day; a day covers a start that is hours late. The
// key is single-use, pre-authorised and tagged, is replaced when it expires
// unused, and is replaced at once when tailscaled reports it refused, so
// a longer life buys nothing but exposure.
const KeyExpiry = 24 * time.Hour

// Timeout bounds one API call, the OAuth token request it may need
// included: a slow or silent API holds a reconcile no longer than this, and
// the managed reconciler backs off.
const Timeout = 10 * time.Second

// API is what the provider needs from the Tailscale API.
type API interface {
	// CreateAuthKey mints a single-use, pre-authorised key.
	CreateAuthKey(ctx context.Context, req KeyRequest) (id, key string, expires time.Time, err error)
	// RevokeKey revokes an auth key that will not be used; one already
	// gone is success.
	RevokeKey(ctx context.Context, id string) error
	// Device returns what the tailnet says of a device; nil when it is
	// gone.
	Device(ctx context.Context, id string) (*Device, error)
	// DeleteDevice removes a device; one already gone is success.
	DeleteDevice(ctx context.Context, id string) error
}

// KeyRequest says what a minted key's device is.
type KeyRequest struct {
	Tags        []string
	Description string
	// Ephemeral: the device leaves the tailnet soon after it goes offline
	// (the prober's; a relay replica's is not).
	Ephemeral bool
}

// Device is what the provider checks of a device before deleting it.
type Device struct {
	ID, Hostname string
	Tags         []string
	Created      time.Time
}

// Client is the API over tailscale.com/client/tailscale/v2 with an OAuth
// client's credentials.
type Client struct {
	c       *tsapi.Client
	timeout time.Duration
}

// call bounds one API call by the client's timeout.
func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// New returns a client for tailnet ("-" for the OAuth client's own) at
// baseURL ("" for Tailscale's).
func New(baseURL, tailnet, clientID, clientSecret string) (*Client, error) {
	return newClient(baseURL, tailnet, clientID, clientSecret, Timeout)
}

func newClient(baseURL, tailnet, clientID, clientSecret string, timeout time.Duration) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("the Tailscale API base URL %q: %w", baseURL, err)
	}
	if tailnet == "" {
		tailnet = "-"
	}
	// tsapi.OAuth fetches tokens with a client of its own, without a
	// timeout and past Retry-After: the token source here shares both
	// with the API calls.
	hc := &http.Client{Timeout: timeout, Transport: &retryAfter{next: http.DefaultTransport, now: time.Now}}
	tokens := clientcredentials.Config{
		ClientID: clientID, ClientSecret: clientSecret,
		Scopes:   []string{"auth_keys", "devices:core"},
		TokenURL: baseURL + "/api/v2/oauth/token",
		// One request per token: the default tries a second style after a
		// failure, which doubles every failure's requests.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	source := oauth2.ReuseTokenSource(nil, tokens.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, hc)))
	return &Client{c: &tsapi.Client{
		BaseURL:   u,
		Tailnet:   tailnet,
		UserAgent: "provider-peerrelay",
		// No Timeout here: http.Client cancels a timed-out oauth2.Transport
		// through its deprecated CancelRequest, which only logs. Each call
		// has a context deadline instead (call).
		HTTP: &http.Client{Transport: &oauth2.Transport{Base: hc.Transport, Source: source}},
	}, timeout: timeout}, nil
}

// CreateAuthKey mints a key for one device: a relay replica or the prober.
func (c *Client) CreateAuthKey(ctx context.Context, r KeyRequest) (string, string, time.Time, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	var req tsapi.CreateKeyRequest
	req.Capabilities.Devices.Create.Reusable = false
	req.Capabilities.Devices.Create.Ephemeral = r.Ephemeral
	req.Capabilities.Devices.Create.Preauthorized = true
	req.Capabilities.Devices.Create.Tags = r.Tags
	req.ExpirySeconds = int64(KeyExpiry / time.Second)
	req.Description = r.Description
	k, err := c.c.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("cannot create an auth key: %w", err)
	}
	return k.ID, k.Key, k.Expires, nil
}

// RevokeKey revokes the auth key; a key already gone is success.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.c.Keys().Delete(ctx, id); err != nil && !tsapi.IsNotFound(err) {
		return fmt.Errorf("cannot revoke auth key %s: %w", id, err)
	}
	return nil
}

// Device returns the device, or nil when the tailnet has none by that ID.
func (c *Client) Device(ctx context.Context, id string) (*Device, error) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	d, err := c.c.Devices().Get(ctx, id)
	if tsapi.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get tailnet device %s: %w", id, err)
	}
	return &Device{ID: id, Hostname: d.Hostname, Tags: d.Tags, Created: d.Created.Time}, nil
}

// DeleteDevice removes the device; a device already gone is success.
func (c *Client) DeleteDevice(ctx context.Context, id string) error {
	ctx, cancel := c.call(ctx)
	defer cancel()
	if err := c.c.Devices().Delete(ctx, id); err != nil && !tsapi.IsNotFound(err) {
		return fmt.Errorf("cannot delete tailnet device %s: %w", id, err)
	}
	return nil
}

// IsRefused says whether err is the tailnet refusing the OAuth client
// itself (401 or 403, from the API or its token endpoint): a client
// deleted, or stripped of a scope, which no retry mends.
func IsRefused(err error) bool {
	var ae tsapi.APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode == http.StatusUnauthorized || re.Response.StatusCode == http.StatusForbidden ||
			re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client"
	}
	return false
}
