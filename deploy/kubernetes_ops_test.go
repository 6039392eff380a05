package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKubernetesReadinessSurvivesStoreOutage: the shipped configuration
// fails open or to local everywhere, so the readiness probe (/readyz,
// which follows the failure mode) keeps every replica in the Service while
// Redis is down instead of emptying it (docs/DEPLOY.md, "Probes and the
// failure mode").
func TestKubernetesReadinessSurvivesStoreOutage(t *testing.T) {
	m := loadManifests(t)
	pod := m.deployment.Spec.Template.Spec
	file := configFile(t, pod, pod.Containers[0], m.configMap)
	cfg := loadConfig(t, file, map[string]string{"FLOODGATE_REDIS_URL": "redis://redis:6379/0", "FLOODGATE_ADMIN_TOKEN": "t", "FLOODGATE_API_SECRET": "0123456789abcdef0123"})
	if what := cfg.FailsClosed(); what != "" {
		t.Errorf("%s fails closed: with Redis down /readyz answers 503 on every replica", what)
	}
}

// TestKubernetesSecretCommand: the `kubectl create secret` command in
// deployment.yaml's header, and the one in docs/DEPLOY.md, give every key
// of the Secret that the pod reads; a key left out keeps the pod from
// starting (CreateContainerConfigError).
func TestKubernetesSecretCommand(t *testing.T) {
	m := loadManifests(t)
	var need []string
	for _, ref := range secretEnv(t, m.deployment.Spec.Template.Spec.Containers[0]) {
		need = append(need, strings.TrimPrefix(ref, "floodgate/"))
	}
	slices.Sort(need)
	for _, file := range []string{"kubernetes/deployment.yaml", "../docs/DEPLOY.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var given []string
		for _, m := range regexp.MustCompile(`--from-literal=([a-z-]+)=`).FindAllSubmatch(b, -1) {
			given = append(given, string(m[1]))
		}
		slices.Sort(given)
		if !slices.Equal(slices.Compact(given), need) {
			t.Errorf("%s: the Secret command gives %v; the pod reads %v", file, given, need)
		}
	}
}
