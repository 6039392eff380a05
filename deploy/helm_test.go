package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "sigs.k8s.io/yaml"
)

// helmBinary is Helm, from FLOODGATE_TEST_HELM (scripts/services-up.sh
// builds it with go install into a scratch directory) or PATH.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLOODGATE_TEST_HELM"); p != "" {
		return p
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		t.Fatalf("helm is not installed and FLOODGATE_TEST_HELM is not set: run scripts/services-up.sh and load /tmp/floodgate-test/env")
	}
	return p
}

// rendered is one `helm template` of the chart, decoded strictly by kind.
type rendered struct {
	deployment appsv1.Deployment
	service    corev1.Service
	configMap  corev1.ConfigMap
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	monitoring map[string]map[string]any // ServiceMonitor, PrometheusRule
}

func renderChart(t *testing.T, helm string, set ...string) rendered {
	t.Helper()
	args := []string{"template", "fg", "helm/floodgate", "--namespace", "edge"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	r := rendered{monitoring: map[string]map[string]any{}}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var head struct{ Kind string }
		if k8syaml.Unmarshal([]byte(doc), &head) != nil || head.Kind == "" {
			continue
		}
		var into any
		switch head.Kind {
		case "Deployment":
			into = &r.deployment
		case "Service":
			into = &r.service
		case "ConfigMap":
			into = &r.configMap
		case "PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			into = r.pdb
		case "HorizontalPodAutoscaler":
			r.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
			into = r.hpa
		case "ServiceMonitor", "PrometheusRule":
			m := map[string]any{}
			r.monitoring[head.Kind], into = m, &m
		default:
			t.Fatalf("unexpected kind %q", head.Kind)
		}
		if err := k8syaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v\n%s", head.Kind, err, doc)
		}
		if m, ok := into.(*map[string]any); ok {
			r.monitoring[head.Kind] = *m
		}
	}
	return r
}

// TestHelmChart lints deploy/helm/floodgate with Helm and renders it with
// its defaults and with every option on: the pods' selectors match, the
// probes and Secret keys are the kustomize base's, the configuration
// loads with the daemon's loader and fails to local (so readiness holds
// through a Redis outage), an HPA takes over the replica count, and the
// ServiceMonitor and the PrometheusRule's alerts (refusals, store errors,
// breaker state) name metrics the daemon serves.
func TestHelmChart(t *testing.T) {
	helm := helmBinary(t)
	if out, err := exec.Command(helm, "lint", "--strict", "helm/floodgate").CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	r := renderChart(t, helm)
	pod := r.deployment.Spec.Template
	if !matches(r.deployment.Spec.Selector.MatchLabels, pod.Labels) || !matches(r.service.Spec.Selector, pod.Labels) || r.pdb == nil || !matches(r.pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("selectors do not all match the pod labels %v", pod.Labels)
	}
	if r.deployment.Spec.Replicas == nil || *r.deployment.Spec.Replicas != 2 || r.hpa != nil || len(r.monitoring) != 0 {
		t.Errorf("defaults: replicas %v, HPA %v, monitoring %v", r.deployment.Spec.Replicas, r.hpa, r.monitoring)
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz", ports)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", ports)
	checkSecurity(t, pod.Spec, c)
	env := secretEnv(t, c)
	if env["FLOODGATE_REDIS_URL"] != "floodgate/redis-url" || env["FLOODGATE_ADMIN_TOKEN"] != "floodgate/admin-token" || env["FLOODGATE_API_SECRET"] != "floodgate/api-secret" {
		t.Errorf("env from the Secret: %v", env)
	}
	file := configFile(t, pod.Spec, c, r.configMap)
	cfg := loadConfig(t, file, map[string]string{"FLOODGATE_REDIS_URL": "redis://redis:6379/0", "FLOODGATE_ADMIN_TOKEN": "t", "FLOODGATE_API_SECRET": "0123456789abcdef0123"})
	if what := cfg.FailsClosed(); what != "" || cfg.Store.LocalShare != 0.5 || cfg.Store.Type != "redis" {
		t.Errorf("store %q, local_share %v, fails closed: %q", cfg.Store.Type, cfg.Store.LocalShare, what)
	}
	if hosts := strings.Join(cfg.Listeners.AllowedHosts, " "); hosts != "fg fg.edge.svc fg.edge.svc.cluster.local" {
		t.Errorf("allowed hosts %q", hosts)
	}
	sameLimitsAsQuickstart(t, file)

	r = renderChart(t, helm, "autoscaling.enabled=true", "serviceMonitor.enabled=true", "prometheusRule.enabled=true")
	if r.deployment.Spec.Replicas != nil || r.hpa == nil || r.hpa.Spec.ScaleTargetRef.Name != r.deployment.Name || r.hpa.Spec.MaxReplicas != 10 {
		t.Errorf("with autoscaling: replicas %v, HPA %+v", r.deployment.Spec.Replicas, r.hpa)
	}
	monitoring := r.monitoring
	for _, set := range [][]string{{"store.type=memory"}, {"store.type=memory", "replicaCount=1"}, {"store.type=memory", "replicaCount=1", "podDisruptionBudget.enabled=false", "autoscaling.enabled=true"}} {
		out, err := exec.Command(helm, "template", "fg", "helm/floodgate", "--set", strings.Join(set, ",")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "store.type=memory keeps each replica's counters apart") {
			t.Errorf("%v: rendered (%v), want the memory store refused beside more than one replica or a disruption budget:\n%s", set, err, out)
		}
	}
	r = renderChart(t, helm, "store.type=memory", "replicaCount=1", "podDisruptionBudget.enabled=false", "store.failureMode=fail-closed")
	if r.deployment.Spec.Replicas == nil || *r.deployment.Spec.Replicas != 1 || r.pdb != nil {
		t.Errorf("memory store: replicas %v, disruption budget %v; want 1 and none", r.deployment.Spec.Replicas, r.pdb)
	}
	if _, ok := secretEnv(t, r.deployment.Spec.Template.Spec.Containers[0])["FLOODGATE_REDIS_URL"]; ok {
		t.Errorf("a memory store still reads the Redis URL")
	}
	cfg = loadConfig(t, configFile(t, r.deployment.Spec.Template.Spec, r.deployment.Spec.Template.Spec.Containers[0], r.configMap),
		map[string]string{"FLOODGATE_ADMIN_TOKEN": "t", "FLOODGATE_API_SECRET": "0123456789abcdef0123"})
	if cfg.Store.Type != "memory" || cfg.FailsClosed() != "store.failure_mode" {
		t.Errorf("memory store: %q, fails closed %q", cfg.Store.Type, cfg.FailsClosed())
	}
	sm, _ := k8syaml.Marshal(monitoring["ServiceMonitor"])
	if !strings.Contains(string(sm), "port: admin") || !strings.Contains(string(sm), "key: admin-token") {
		t.Errorf("ServiceMonitor:\n%s", sm)
	}
	rules, _ := k8syaml.Marshal(monitoring["PrometheusRule"])
	for _, want := range []string{"alert: FloodgateRefusalsHigh", "floodgate_decisions_total", "> 0.2", "alert: FloodgateStoreErrors", "floodgate_store_errors_total", "alert: FloodgateBreakerOpen", "floodgate_store_breaker_state", "over 20%"} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("PrometheusRule lacks %q:\n%s", want, rules)
		}
	}
}
