package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "sigs.k8s.io/yaml"
)

// manifests are kubernetes/'s objects, decoded strictly into the API's
// own types: a misspelt or misplaced field fails the test.
type manifests struct {
	deployment appsv1.Deployment
	service    corev1.Service
	configMap  corev1.ConfigMap
	pdb        policyv1.PodDisruptionBudget
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	decodeFile(t, "kubernetes/kustomization.yaml", &kust)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	var listed []string
	for _, f := range kust.Resources {
		listed = append(listed, filepath.Join("kubernetes", f))
	}
	listed = append(listed, "kubernetes/kustomization.yaml")
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Fatalf("kustomization.yaml lists %v; the directory holds %v", listed, files)
	}
	var m manifests
	targets := map[string]any{"Deployment": &m.deployment, "Service": &m.service, "ConfigMap": &m.configMap, "PodDisruptionBudget": &m.pdb}
	for _, f := range kust.Resources {
		var head struct{ Kind string }
		b, _ := os.ReadFile(filepath.Join("kubernetes", f))
		k8syaml.Unmarshal(b, &head) // decodeFile below reports errors
		obj, ok := targets[head.Kind]
		if !ok {
			t.Fatalf("%s: unexpected kind %q", f, head.Kind)
		}
		decodeFile(t, filepath.Join("kubernetes", f), obj)
		delete(targets, head.Kind)
	}
	if len(targets) != 0 {
		t.Fatalf("missing kinds: %v", targets)
	}
	return m
}

// decodeFile decodes a one-document YAML file, refusing unknown fields.
func decodeFile(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("\n---")) {
		t.Fatalf("%s: one object per file", file)
	}
	if err := k8syaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestKubernetesManifests: probes on the admin listener (liveness
// /healthz, readiness /readyz), resource requests, the ConfigMap mounted
// as a directory so that its updates reach the daemon's file watcher, the
// Redis URL and admin token from the Secret, a Service and a
// PodDisruptionBudget selecting the pods, and a configuration that loads.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	pod := m.deployment.Spec.Template
	labels := pod.Labels
	if !matches(m.deployment.Spec.Selector.MatchLabels, labels) || !matches(m.service.Spec.Selector, labels) || !matches(m.pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("selectors do not all match the pod labels %v", labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz", ports)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", ports)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests: %v", c.Resources.Requests)
	}
	for _, p := range m.service.Spec.Ports {
		if p.TargetPort.Type != intstr.String || ports[p.TargetPort.StrVal] == 0 {
			t.Errorf("Service port %s targets %v, not a named container port", p.Name, p.TargetPort)
		}
	}
	if m.pdb.Spec.MinAvailable == nil || m.pdb.Spec.MinAvailable.IntValue() >= int(*m.deployment.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas blocks every drain", m.pdb.Spec.MinAvailable, *m.deployment.Spec.Replicas)
	}
	checkSecurity(t, pod.Spec, c)
	env := secretEnv(t, c)
	if env["FLOODGATE_REDIS_URL"] != "floodgate/redis-url" || env["FLOODGATE_ADMIN_TOKEN"] != "floodgate/admin-token" {
		t.Errorf("env from the Secret: %v", env)
	}
	file := configFile(t, pod.Spec, c, m.configMap)
	cfg := loadConfig(t, file, map[string]string{"FLOODGATE_REDIS_URL": "redis://redis:6379/0", "FLOODGATE_ADMIN_TOKEN": "t", "FLOODGATE_API_SECRET": "0123456789abcdef0123"})
	if cfg.Admin.Listen != ":9090" || ports["admin"] != 9090 {
		t.Errorf("admin listens on %q, the probes' port is %d", cfg.Admin.Listen, ports["admin"])
	}
	if !strings.Contains(m.configMap.Data["floodgate.yaml"], `url: "${FLOODGATE_REDIS_URL}"`) {
		t.Errorf("the Redis URL is not taken from FLOODGATE_REDIS_URL")
	}
	sameLimitsAsQuickstart(t, file)
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkProbe(t *testing.T, name string, p *corev1.Probe, path string, ports map[string]int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe: %+v, want an HTTP GET", name, p)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.StrVal != "admin" || ports["admin"] == 0 {
		t.Errorf("%s probe: GET %s on %v, want %s on the admin port", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
	}
}

// checkSecurity: the image's user, no privilege escalation, no
// capabilities, a read-only root.
func checkSecurity(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext: %+v", psc)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext: %+v", sc)
	}
}

// secretEnv maps each variable taken from a Secret to "secret/key".
func secretEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return env
}

// configFile finds the file that the container's -c names in the
// ConfigMap mounted as a directory (a subPath mount never sees updates),
// and writes it to a temporary file.
func configFile(t *testing.T, pod corev1.PodSpec, c corev1.Container, cm corev1.ConfigMap) string {
	t.Helper()
	i := slices.Index(c.Args, "-c")
	if i < 0 || i+1 == len(c.Args) {
		t.Fatalf("args %v name no -c FILE", c.Args)
	}
	path := c.Args[i+1]
	var mount *corev1.VolumeMount
	for j := range c.VolumeMounts {
		if filepath.Dir(path) == c.VolumeMounts[j].MountPath {
			mount = &c.VolumeMounts[j]
		}
	}
	if mount == nil || mount.SubPath != "" {
		t.Fatalf("%s is not in a directory mount: %+v", path, c.VolumeMounts)
	}
	vi := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if vi < 0 || pod.Volumes[vi].ConfigMap == nil || pod.Volumes[vi].ConfigMap.Name != cm.Name {
		t.Fatalf("volume %q is not the ConfigMap %q", mount.Name, cm.Name)
	}
	data, ok := cm.Data[filepath.Base(path)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, filepath.Base(path))
	}
	file := filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
