// Command tenantmetrics is a hostile tenant's relay image for the system
// tests: it serves the metrics port a relay pod has (9002) and logs every
// request it gets, with its source, to stdout. With -redirect it answers
// /metrics with a redirect there; without, it plays a bystander pod of
// another namespace, whose log shows whether anything reached it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("address", ":9002", "address to serve on")
	redirect := flag.String("redirect", "", "URL /metrics redirects to")
	flag.Parse()
	log.SetFlags(0)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("request %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		if *redirect != "" && r.URL.Path == "/metrics" {
			http.Redirect(w, r, *redirect, http.StatusFound)
			return
		}
		_, _ = fmt.Fprintln(w, "tailscaled_peer_relay_forwarded_packets_total 1000")
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}
