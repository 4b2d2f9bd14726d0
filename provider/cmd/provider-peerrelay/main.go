// Command provider-peerrelay runs the peerrelay provider: it resolves each
// relay replica's public endpoints and writes its tailscaled config.
package main

import (
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/gate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/peerrelay/peerrelay/provider"
	"github.com/peerrelay/peerrelay/provider/relayconfig"
)

// CLI flags, as Crossplane providers spell them.
type CLI struct {
	Debug            bool          `short:"d" help:"Run with debug logging."`
	Poll             time.Duration `default:"10m" help:"How often to re-resolve every RelayConfig even without a change (watches deliver changes at once)."`
	Sync             time.Duration `short:"s" default:"1h" help:"Controller manager sync period."`
	LeaderElection   bool          `env:"LEADER_ELECTION" default:"true" negatable:"" help:"Use leader election (on by default): only one replica reconciles, so two pods of a Deployment, or an old and a new revision, never mint a key twice."`
	LeaseNamespace   string        `env:"POD_NAMESPACE" help:"Namespace of the leader election lease; default the pod's own."`
	MaxReconcileRate int           `default:"10" help:"The global maximum rate per second at which resources may be checked for drift."`
	MetricsAddress   string        `default:":8080" help:"Address to serve Prometheus metrics on."`
	HealthAddress    string        `default:":8081" help:"Address to serve health probes on."`
	PollStateMetric  time.Duration `default:"5s" help:"How often to record the RelayConfig state metrics (exist, ready, synced)."`

	EnableNamespacedProviderConfigOverrides bool `help:"Let namespaced ProviderConfigs, which tenants may write, use the provider's own AWS identity (InjectedIdentity) and set spec.aws.endpoint and spec.tailscale.baseURL."`
}

// Run the provider until it is signalled to stop.
func (c *CLI) Run() error {
	zl := zap.New(zap.UseDevMode(c.Debug), zap.Level(levelFor(c.Debug)))
	log := logging.NewLogrLogger(zl.WithName("provider-peerrelay"))
	ctrl.SetLogger(zl)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := provider.NewManager(ratelimiter.LimitRESTConfig(cfg, c.MaxReconcileRate), scheme, provider.ManagerOptions{
		SyncPeriod: c.Sync, LeaderElection: c.LeaderElection, LeaderElectionNamespace: c.LeaseNamespace,
		MetricsAddress: c.MetricsAddress, HealthAddress: c.HealthAddress,
	})
	if err != nil {
		return err
	}
	o := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: c.MaxReconcileRate,
		PollInterval:            c.Poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(c.MaxReconcileRate),
		Features:                &feature.Flags{},
		// safe-start (package/provider/crossplane.yaml): the RelayConfig
		// controller waits for its CRD (provider.Setup).
		Gate: new(gate.Gate[schema.GroupVersionKind]),
	}
	if c.EnableNamespacedProviderConfigOverrides {
		o.Features.Enable(relayconfig.FeatureNamespacedOverrides)
	}
	if o.MetricOptions, err = provider.Metrics(c.PollStateMetric); err != nil {
		return err
	}
	if err := provider.Setup(mgr, o); err != nil {
		return err
	}
	log.Info("starting", "poll", c.Poll, "leaderElection", c.LeaderElection)
	return mgr.Start(ctrl.SetupSignalHandler())
}

func levelFor(debug bool) zapcore.Level {
	if debug {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Description("Crossplane provider for Tailscale peer relays."))
	if err := ctx.Run(); err != nil {
		ctx.Errorf("%v", err)
		os.Exit(1)
	}
}
