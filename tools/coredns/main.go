// Command coredns is CoreDNS built with only the plugins the test node's
// cluster DNS uses, as CoreDNS documents a build with its own plugin list:
// the full build carries every cloud's DNS SDK.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives in the order of CoreDNS's own plugin.cfg.
var directives = []string{"bind", "ready", "errors", "hosts", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
