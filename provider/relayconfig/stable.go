package relayconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/oauth2"
)

// What changes from one failure to the next in an error's text: a request
// ID (AWS, the Tailscale API), the local address and ephemeral port of a
// connection. A condition message or event carrying one is new every time,
// so every failure would write the RelayConfig's status, that write would
// requeue it at once, and the managed reconciler's backoff would never
// start.
var (
	requestID = regexp.MustCompile(`(?i)(,\s*)?\b(x-)?request[ _-]?id["']?\s*[:=]\s*["']?[A-Za-z0-9._-]*["']?`)
	localAddr = regexp.MustCompile(`(\d{1,3}(\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):\d+->`)
)

// stableMessage is err's text as a condition message: the same for the
// same failure. An OAuth token endpoint's answer is reduced to its status
// and error code: its body may echo the client's credentials.
func stableMessage(err error) string {
	msg := err.Error()
	var oe *oauth2.RetrieveError
	if errors.As(err, &oe) {
		short := "the OAuth token request was refused"
		if oe.Response != nil {
			short += fmt.Sprintf(": HTTP %d", oe.Response.StatusCode)
		}
		if oe.ErrorCode != "" {
			short += " " + oe.ErrorCode
		}
		msg = strings.Replace(msg, oe.Error(), short, 1)
	}
	msg = requestID.ReplaceAllString(msg, "")
	return localAddr.ReplaceAllString(msg, "")
}

// stableError is an error with a stable message (stableMessage) that still
// unwraps to what happened.
type stableError struct{ err error }

func (e stableError) Error() string { return stableMessage(e.err) }
func (e stableError) Unwrap() error { return e.err }

// stable makes err's message stable; nil stays nil.
func stable(err error) error {
	if err == nil {
		return nil
	}
	return stableError{err}
}
