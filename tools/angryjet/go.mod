module github.com/peerrelay/peerrelay/tools/angryjet

go 1.26.8

tool github.com/crossplane/crossplane-tools/cmd/angryjet

require (
	github.com/alecthomas/kingpin/v2 v2.4.0 // indirect
	github.com/alecthomas/units v0.0.0-20240927000941-0f3dac36c52b // indirect
	github.com/crossplane/crossplane-tools v0.0.0-20260719180100-659f1dc036c5 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
	golang.org/x/mod v0.38.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/tools v0.48.0 // indirect
)
