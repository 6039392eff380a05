package deploy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// loadConfig loads file with the daemon's loader, the environment set to
// env, and fails the test on any configuration error.
func loadConfig(t *testing.T, file string, env map[string]string) *config.Config {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return cfg
}

// sameLimitsAsQuickstart: file's policies, rules and headers are the
// quickstart's, so every way of running Floodgate shows what README shows.
func sameLimitsAsQuickstart(t *testing.T, file string) {
	t.Helper()
	want, got := limits(t, "../examples/quickstart.yaml"), limits(t, file)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: limits differ from the quickstart's:\n got %v\nwant %v", file, got, want)
	}
}

func limits(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return map[string]any{"policies": doc["policies"], "rules": doc["rules"], "headers": doc["headers"]}
}

// TestContainerConfig: the image's configuration loads, listens on every
// interface on the ports the Dockerfile exposes (the decision API on
// loopback, having no callers), and is the quickstart.
func TestContainerConfig(t *testing.T) {
	const file = "container/floodgate.yaml"
	cfg := loadConfig(t, file, nil)
	if cfg.Gateway.Listen != ":8080" || cfg.API.Listen != "127.0.0.1:8081" || cfg.Admin.Listen != ":9090" {
		t.Errorf("listeners: gateway %q, api %q, admin %q", cfg.Gateway.Listen, cfg.API.Listen, cfg.Admin.Listen)
	}
	sameLimitsAsQuickstart(t, file)
}

// TestCompose: compose.yaml runs the image on its configuration directory,
// publishes the listeners on loopback only, gives the Redis URL to a
// configuration that loads with it, and mounts the demo app's nginx file.
func TestCompose(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Build       string            `yaml:"build"`
			Image       string            `yaml:"image"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	b, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	fg, redis, app := compose.Services["floodgate"], compose.Services["redis"], compose.Services["app"]
	if fg.Build != "." || redis.Image == "" || app.Image == "" {
		t.Fatalf("services: %+v", compose.Services)
	}
	if want := []string{"./deploy/compose/floodgate:/etc/floodgate:ro"}; !reflect.DeepEqual(fg.Volumes, want) {
		t.Errorf("floodgate volumes %v, want %v", fg.Volumes, want)
	}
	if want := []string{"127.0.0.1:8080:8080", "127.0.0.1:9090:9090"}; !reflect.DeepEqual(fg.Ports, want) {
		t.Errorf("floodgate ports %v, want %v", fg.Ports, want)
	}
	for _, v := range app.Volumes {
		if _, err := os.Stat("../" + v[:len(v)-len(":/etc/nginx/conf.d/default.conf:ro")]); err != nil {
			t.Errorf("app volume %s: %v", v, err)
		}
	}
	const file = "compose/floodgate/floodgate.yaml"
	cfg := loadConfig(t, file, map[string]string{"FLOODGATE_REDIS_URL": fg.Environment["FLOODGATE_REDIS_URL"]})
	if cfg.Gateway.Upstream != "http://app:3000" || cfg.Store.Type != "redis" || cfg.Store.Redis.URL != "redis://redis:6379/0" {
		t.Errorf("gateway → %q, store %q at %q", cfg.Gateway.Upstream, cfg.Store.Type, cfg.Store.Redis.URL)
	}
	// Every published port reaches a listener on every interface of the
	// container: a port published to a loopback listener answers nothing.
	for _, p := range fg.Ports {
		port := p[strings.LastIndexByte(p, ':')+1:]
		listens := map[string]string{"8080": cfg.Gateway.Listen, "9090": cfg.Admin.Listen}
		if cfg.API != nil {
			listens["8081"] = cfg.API.Listen
		}
		if l := listens[port]; l != ":"+port {
			t.Errorf("compose.yaml publishes %s, where the daemon listens on %q", p, l)
		}
	}
	sameLimitsAsQuickstart(t, file)
}
