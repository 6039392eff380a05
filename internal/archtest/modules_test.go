package archtest

import (
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
)

// library is every module the library's packages import, with the package
// that needs it. A library user's `go list -m all` holds these and what
// they require, nothing of the daemon's: its CLI, file watcher and browser
// test live in the daemon's module (cmd/floodgate), the chi example in its
// own. A new entry is a decision every library user pays for.
var library = map[string]string{
	"github.com/dunglas/httpsfv":                       "header",
	"github.com/envoyproxy/go-control-plane/envoy":     "envoyrls, rlqs",
	"github.com/envoyproxy/go-control-plane/ratelimit": "envoyrls (RateLimitConfig over xDS)",
	"github.com/jackc/pgx/v5":                          "tier",
	"github.com/prometheus/client_golang":              "metrics",
	"github.com/realclientip/realclientip-go":          "clientip",
	"github.com/redis/go-redis/v9":                     "redisstore",
	"github.com/sony/gobreaker/v2":                     "client",
	"golang.org/x/sync":                                "tier",
	"golang.org/x/time":                                "client",
	"google.golang.org/genproto/googleapis/rpc":        "grpclimit",
	"google.golang.org/grpc":                           "grpclimit, envoyrls, rlqs",
	"google.golang.org/protobuf":                       "grpclimit, envoyrls, rlqs",
	"gopkg.in/yaml.v3":                                 "envoyrls (envoyproxy/ratelimit's files)",
}

// TestLibraryRequirements: the root module's direct requirements are
// exactly the library's (scripts/tidy-check.sh keeps go.mod what its
// imports need, so a library package that starts to import a daemon
// dependency fails here).
func TestLibraryRequirements(t *testing.T) {
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	var direct []string
	for _, r := range mod.Require {
		if !r.Indirect {
			direct = append(direct, r.Path)
		}
		if _, ok := library[r.Path]; !ok && !r.Indirect {
			t.Errorf("go.mod requires %s, which no library package should need (daemon-only code belongs in %s's module)", r.Path, daemon)
		}
	}
	for path, by := range library {
		if !slices.Contains(direct, path) {
			t.Errorf("go.mod no longer requires %s (for %s): drop it from this list", path, by)
		}
	}
}
