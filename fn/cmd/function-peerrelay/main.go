// Command function-peerrelay serves the PeerRelay composition function over
// gRPC.
package main

import (
	"github.com/alecthomas/kong"
	function "github.com/crossplane/function-sdk-go"

	"github.com/peerrelay/peerrelay/fn"
)

// CLI of this function.
type CLI struct {
	Debug bool `help:"Emit debug logs in addition to info logs." short:"d"`

	Network            string `default:"tcp" help:"Network on which to listen for gRPC connections."`
	Address            string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSServerCertsDir  string `env:"TLS_SERVER_CERTS_DIR" help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)"`
	Insecure           bool   `help:"Run without mTLS credentials. If you supply this flag --tls-server-certs-dir will be ignored."`
	MaxRecvMessageSize int    `default:"4" help:"Maximum size of received messages in MB."`
	MetricsAddress     string `default:":8080" help:"Address to serve Prometheus metrics on; empty turns them off."`
}

// Run this function.
func (c *CLI) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	return function.Serve(&fn.Function{Log: log},
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSServerCertsDir),
		function.Insecure(c.Insecure),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024),
		function.WithMetricsServer(c.MetricsAddress))
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Description("A Crossplane composition function that runs Tailscale peer relays."))
	ctx.FatalIfErrorf(ctx.Run())
}
