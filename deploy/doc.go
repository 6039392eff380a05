// Package deploy holds no code: its tests check the files that install
// and run Floodgate — the Kubernetes manifests in kubernetes/, the
// container image's configuration in container/ and compose.yaml with
// compose/ — against the real Kubernetes API types and the daemon's own
// configuration loader. It is a module of its own so that the Kubernetes
// API packages stay out of Floodgate's.
package deploy
